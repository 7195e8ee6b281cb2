// A code span without spaces of up to 40 characters (a key, a path, a metric's name) is one word:
// docs/stylesheets/extra.css keeps it on one line on a wide screen instead of breaking it mid-word. Spans with spaces
// (a signature, a command) and longer values (a default of the configuration reference) wrap as text.
function markIdentifiers() {
  document.querySelectorAll(".md-typeset :not(pre) > code").forEach((c) => {
    const t = c.textContent.trim();
    if (!/\s/.test(t) && t.length <= 40) c.classList.add("vase-identifier");
  });
}
if (typeof document$ !== "undefined") document$.subscribe(markIdentifiers);
else document.addEventListener("DOMContentLoaded", markIdentifiers);

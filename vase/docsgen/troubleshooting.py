"""The troubleshooting page, generated from the code's error sites: every one-line error vase raises for a user's
input (``ConfigError``, ``DataError``, ``MetricError``, ``VaseError``, and the ``error: ...`` lines of the argparse
tools), grouped by where it comes from, each with what to do as its message says it.

    python -m vase.docsgen.troubleshooting            # writes docs/troubleshooting.md
    python -m vase.docsgen.troubleshooting --check    # exit 1 when the committed page differs (make docs runs it)

A message is shown as written, its ``{...}`` parts as ``<...>`` placeholders naming what fills them; a message that is
built elsewhere (a variable, a call) is listed by its site only. Every entry point prints these as one line
(``config error: ...`` for a bad value or key, ``error: ...`` for a bad file or input) and exits with status 2.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path

from vase import markdown as md
from vase.docsgen.symptoms import SYMPTOMS
from vase.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
ERRORS = ("ConfigError", "DataError", "MetricError", "VaseError")
GROUPS = (
    ("config", "Any command: the config check (before anything loads)", ("vase/config/",)),
    ("checkpoint", "Checkpoints and models", ("vase/models/",)),
    ("render", "Rendering (python -m vase.data.render)", ("vase/render/", "vase/data/render.py")),
    ("data", "Datasets, layouts and the dataset check", ("vase/data/", "vase/annotate/", "vase/views.py", "vase/images.py")),
    ("training", "Training (train.py)", ("vase/pipeline/", "vase/training/", "vase/prompt_tasks/", "vase/rewards/")),
    ("evaluation", "Evaluation and metrics (evaluate.py)", ("vase/eval/", "vase/metrics/")),
    ("loggers", "Loggers and dashboards", ("vase/loggers.py",)),
    ("runs", "Run folders, resuming and sweeps", ("vase/runs/", "vase/io.py", "vase/reports/")),
    ("curation", "Curation and 3D (python -m vase.filter, python -m vase.reconstruct, retrieval)",
     ("vase/filter/", "vase/reconstruct/", "vase/retrieval/")),
    ("integrations", "ms-swift, TRL and the checks that run other tools", ("vase/integrations/", "vase/sanity.py")),
)


def _text(node: ast.AST, env: dict[str, ast.AST] | None = None) -> str | None:
    """A message's text with each ``{...}`` part marked as ``\x00name\x01`` (`_render` shows it as a word); a local
    variable the function assigned a literal (``todo = "start it ..."``) is read in; None where it is not a literal."""
    env = env or {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in env and isinstance(env[node.id], ast.Constant):
        return str(env[node.id].value)
    if isinstance(node, ast.Name) and node.id in env:
        return _text(env[node.id], {k: v for k, v in env.items() if k != node.id})
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) and part.value.id in env \
                    and part.conversion == -1 and part.format_spec is None:
                out.append(_text(part.value, env) or f"\x00{part.value.id}\x01")
            else:
                out.append(f"\x00{_name(part.value) if isinstance(part, ast.FormattedValue) else '…'}\x01")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, env), _text(node.right, env)
        return None if left is None or right is None else left + right
    return None


def _name(node: ast.AST) -> str:
    """A short name for what fills a placeholder: ``cfg.get('action')`` -> action, ``', '.join(FILTER_ACTIONS)`` ->
    FILTER_ACTIONS, ``path.parent`` -> parent, ``type(e).__name__`` -> __name__ (the error's type).

    >>> _name(ast.parse("cfg.get('action')").body[0].value), _name(ast.parse("', '.join(FILTER_ACTIONS)").body[0].value)
    ('action', 'FILTER_ACTIONS')
    """
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    if isinstance(node, ast.IfExp):
        return _name(node.body)
    if isinstance(node, ast.Call):
        if node.args and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "join", "select"):
            return _name(node.args[0])
        if isinstance(node.func, ast.Attribute):
            return _name(node.func.value) if node.func.attr in ("splitlines", "strip", "rstrip", "rsplit", "relative_to") \
                else node.func.attr
        return _name(node.args[0]) if node.args and getattr(node.func, "id", "") in ("str", "repr", "len", "int") \
            else getattr(node.func, "id", "…")
    return "…"


def error_sites(root: Path = ROOT) -> list[dict[str, str | int]]:
    """Every place vase raises a user-facing error or prints an ``error: ...`` line: file, line, the function it is in,
    kind, message (the page names the file and function, not the line, so it changes only when an error does).

    A message held in a local variable assigned a literal is read in. A helper that only passes on a message it was
    given (``fault(kind, message)``: raise or collect) is not a site itself; its callers' messages are."""
    sites: list[dict[str, str | int]] = []
    for path in sorted((root / "vase").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        spans = sorted(((f.lineno, f.end_lineno or f.lineno, f) for f in funcs), key=lambda t: t[1] - t[0])

        def around(line: int, spans: list = spans) -> ast.AST | None:  # the innermost function around a line
            return next((f for a, b, f in spans if a <= line <= b), None)

        consts = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets  # SLURM_STARTUP_S = 20
                  if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}

        def env_of(func: ast.AST | None, consts: dict[str, ast.AST] = consts) -> dict[str, ast.AST]:
            if func is None:
                return dict(consts)
            return {**consts, **{t.id: n.value for n in ast.walk(func) if isinstance(n, ast.Assign) for t in n.targets
                                 if isinstance(t, ast.Name) and isinstance(n.value, (ast.Constant, ast.JoinedStr,
                                                                                     ast.BinOp))}}

        relays: dict[str, tuple[int, str]] = {}  # helper name -> (position of its message argument, error kind)
        for f in funcs:
            params = [x.arg for x in f.args.args]
            for n in ast.walk(f):
                if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
                    name = getattr(n.exc.func, "id", None) or getattr(n.exc.func, "attr", None)
                    arg = n.exc.args[0]
                    if name in ERRORS and isinstance(arg, ast.Name) and arg.id in params:
                        relays[f.name] = (params.index(arg.id), str(name))

        def add(node: ast.AST, kind: str, message: str, rel: str = rel) -> None:
            func = around(node.lineno)
            sites.append({"file": rel, "line": node.lineno, "function": getattr(func, "name", "module"),
                          "kind": kind, "message": message})

        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", None) or getattr(node.exc.func, "attr", None)
                if name not in ERRORS:
                    continue
                func = around(node.lineno)
                if func is not None and func.name in relays:
                    continue
                text = _text(node.exc.args[0], env_of(func)) if node.exc.args else None
                if text:  # a message built elsewhere (another error's text, a list joined) is listed where it is made
                    add(node, str(name), text)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_value" and len(node.args) == 4:
                env = env_of(around(node.lineno))
                key, why = _text(node.args[1], env), _text(node.args[3], env)  # the config's range checks, one per key
                if key and why:
                    add(node, "ConfigError", f"{key}=\x00value\x01 {why}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in relays:
                pos, kind = relays[node.func.id]
                text = _text(node.args[pos], env_of(around(node.lineno))) if len(node.args) > pos else None
                if text:
                    add(node, kind, text)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args:
                text = _text(node.args[0], env_of(around(node.lineno)))
                if text is not None and text.startswith("error: "):
                    add(node, "error line", text.removeprefix("error: "))
    return sites


def _group(rel: str) -> str:
    return next((key for key, _, prefixes in GROUPS if rel.startswith(prefixes)), "other")


WORDS = {"e": "reason", "__name__": "error type", "k": "key", "v": "value", "…": "value", "getattr": "reason",
         "p": "path", "f": "file", "n": "number", "q": "question", "m": "model", "msg": "reason", "first": "reason",
         "sorted": "names", "tuple": "names", "list": "names", "rep": "repetition", "net": "network", "db": "store",
         "out": "folder", "parent": "folder", "lacking": "names", "unknown": "names", "missing": "names"}
"""Placeholder names that read as words on the page (``{e}`` is the reason, ``{type(e).__name__}`` its type)."""
IDENTIFIER = re.compile(r"^(?=.*\w)[\w.\-/\[\]{}*+@~<>:?]*[._/=<][\w.\-/\[\]{}*+@~=<>:?]*$")


def _render(message: str) -> str:
    """A message as the page shows it: its words as written, what fills it in as an italic word, keys, paths and
    commands as code, nothing that Markdown or a table would eat.

    >>> _render("stage.module.lora.r=\\x00value\\x01 must be at least 1 (see stage.yaml)")
    '`stage.module.lora.r=`*value* must be at least 1 (see `stage.yaml`)'
    """
    out = []
    message = re.sub("\x01\x00", "\x01 \x00", " ".join(message.split()))  # two fillings side by side: two words
    for i, part in enumerate(re.split("\x00([^\x01]*)\x01", message)):
        if i % 2:
            out.append(f"*{WORDS.get(part, part).replace('_', ' ').strip() or 'value'}*")
            continue
        quoted = re.split(r"`([^`]+)`", part)  # a message's own `code` stays code
        if len(quoted) > 1:
            out.append("".join(f"`{q}`" if j % 2 else (" " if q[:1] == " " else "") + _render(q)
                               + (" " if q[-1:] == " " and q.strip() else "") for j, q in enumerate(quoted)))
            continue
        words = []
        for word in part.split(" "):
            m = re.match(r"^([(\['\"]*)(.*?)([)\]'\",;:.?!]*)$", word)
            lead, core, tail = m.groups() if m else ("", word, "")
            if core and IDENTIFIER.match(core) and not core.startswith(("http", "(")):
                words.append(f"{_escape(lead)}`{core}`{_escape(tail)}")
            else:
                words.append(_escape(word))
        out.append(" ".join(words))
    return "".join(out).replace("|", "\\|")


def _escape(text: str) -> str:
    text = re.sub(r"([*_\\`])", r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def generate(root: Path = ROOT) -> str:
    sites = error_sites(root)
    lines = ["# Troubleshooting", "",
             "What went wrong, why, and what to do, for the errors users meet first. Each is one line that vase "
             "prints (`config error: ...` for a key or value of the config, `error: ...` for a file, a path or a "
             "server), exits with status 2 and records in the run's folder; a run that was killed or interrupted "
             "is resumed by the same command. Every line below is what vase prints, word for word (a test provokes "
             "each, `tests/test_troubleshooting.py`, and applies its fix).", "",
             "Check before a long run: `VASE_CHECK_CONFIG=1 python train.py <your overrides>` checks the config, "
             "the dataset folder, the checkpoint folder, the adapter and an MLflow server in seconds, and says what "
             "it did not check. `python -m vase.data.check <dataset>` lists every problem of a dataset at once.", ""]
    topics: list[str] = []
    for sym in SYMPTOMS:
        if sym.topic not in topics:
            topics.append(sym.topic)
    for topic in topics:
        lines += [f"## {topic}", ""]
        for sym in (s for s in SYMPTOMS if s.topic == topic):
            lines += [f"### {sym.title}", "", "```text", *_wrap(sym.seen), "```", "",
                      f"**Cause.** {sym.cause}", "", f"**Fix.** {sym.fix}", ""]
    lines += ["## Every error message", "",
              "Every one-line error vase gives for a user's input, generated from the code's error sites by "
              "`python -m vase.docsgen.troubleshooting` (`make docs` fails when this list differs from the code). "
              "Words in italics stand for what fills the message in (a key, a path, a value); each message says what "
              "to do.", ""]
    for key, title, _ in (*GROUPS, ("other", "Other", ())):
        mine = [s for s in sites if _group(str(s["file"])) == key]
        if not mine:
            continue
        lines += [f"### {title}", "", *md.table(["message", "where"])]
        seen: set[str] = set()
        for s in sorted(mine, key=lambda s: (str(s["file"]), int(s["line"]))):
            if len(re.sub("\x00[^\x01]*\x01", " ", str(s["message"])).split()) < 3:
                continue  # all of it filled in elsewhere (a relayed line): listed where it is made
            message = _render(str(s["message"]))
            if message in seen:
                continue
            seen.add(message)
            lines.append(f"| {message} | `{s['file']}` `{s['function']}` |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _wrap(text: str, width: int = 100) -> list[str]:
    """A printed line cut into lines of the code block's width (the page shows it whole, without a scroll bar)."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.docsgen.troubleshooting", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from what the code generates")
    a = ap.parse_args(argv)
    text = generate()
    if a.check:
        if (PAGE.read_text() if PAGE.is_file() else "") != text:
            print(f"{PAGE} differs from the code's error sites: run python -m vase.docsgen.troubleshooting",
                  file=sys.stderr)
            return 1
        print(f"{PAGE}: up to date")
        return 0
    atomic_write_text(PAGE, text)
    print(f"wrote {PAGE} ({len(error_sites())} error sites)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

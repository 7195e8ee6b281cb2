"""The troubleshooting page, generated from the code's error sites: every one-line error vase raises for a user's
input (``ConfigError``, ``DataError``, ``MetricError``, ``VaseError``, and the ``error: ...`` lines of the argparse
tools), grouped by where it comes from, each with what to do as its message says it.

    python -m vase.reports.troubleshooting            # writes docs/troubleshooting.md
    python -m vase.reports.troubleshooting --check    # exit 1 when the committed page differs (make docs runs it)

A message is shown as written, its ``{...}`` parts as ``<...>`` placeholders naming what fills them; a message that is
built elsewhere (a variable, a call) is listed by its site only. Every entry point prints these as one line
(``config error: ...`` for a bad value or key, ``error: ...`` for a bad file or input) and exits with status 2.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from vase.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
ERRORS = ("ConfigError", "DataError", "MetricError", "VaseError")
GROUPS = (
    ("config", "Any command: the config check (before anything loads)", ("vase/config/",)),
    ("checkpoint", "Checkpoints and models", ("vase/models/",)),
    ("data", "Datasets, layouts and the dataset check", ("vase/data/", "vase/annotate/", "vase/views.py", "vase/images.py")),
    ("training", "Training (train.py)", ("vase/pipeline/", "vase/training/", "vase/prompt_tasks/", "vase/rewards/")),
    ("evaluation", "Evaluation and metrics (evaluate.py)", ("vase/eval/", "vase/metrics/")),
    ("loggers", "Loggers and dashboards", ("vase/loggers.py",)),
    ("runs", "Run folders, resuming and sweeps", ("vase/runs.py", "vase/io.py", "vase/reports/")),
    ("render", "Rendering (python -m vase.render)", ("vase/render/",)),
    ("curation", "Curation and 3D (python -m vase.filter, python -m vase.reconstruct, retrieval)",
     ("vase/filter/", "vase/reconstruct/", "vase/retrieval/")),
    ("integrations", "ms-swift, TRL and the checks that run other tools", ("vase/integrations/", "vase/sanity.py")),
)


def _text(node: ast.AST) -> str | None:
    """A message's text with its ``{...}`` parts as ``<...>``; None where it is not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            else:
                out.append(f"<{_name(part.value) if isinstance(part, ast.FormattedValue) else '…'}>")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def _name(node: ast.AST) -> str:
    """A short name for what fills a placeholder: ``cfg.get('task')`` -> task, ``', '.join(FILTER_TASKS)`` ->
    FILTER_TASKS, ``path.parent`` -> parent, ``type(e).__name__`` -> __name__ (the error's type).

    >>> _name(ast.parse("cfg.get('task')").body[0].value), _name(ast.parse("', '.join(FILTER_TASKS)").body[0].value)
    ('task', 'FILTER_TASKS')
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
    kind, message (the page names the file and function, not the line, so it changes only when an error does)."""
    sites: list[dict[str, str | int]] = []
    for path in sorted((root / "vase").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        spans = sorted(((f.lineno, f.end_lineno or f.lineno, f.name) for f in ast.walk(tree)
                        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))), key=lambda t: t[1] - t[0])

        def where(line: int, spans: list[tuple[int, int, str]] = spans) -> str:  # the innermost function around it
            return next((name for a, b, name in spans if a <= line <= b), "module")

        for node in ast.walk(tree):
            call, kind = None, None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", None) or getattr(node.exc.func, "attr", None)
                if name in ERRORS:
                    call, kind = node.exc, name
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_value" and len(node.args) == 4:
                key, why = _text(node.args[1]), _text(node.args[3])  # the config's range checks, one per key
                if key and why:
                    sites.append({"file": rel, "line": node.lineno, "function": where(node.lineno),
                                  "kind": "ConfigError", "message": f"{key}=<value> {why}"})
                continue
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args:
                text = _text(node.args[0])
                if text is not None and text.startswith("error: "):
                    sites.append({"file": rel, "line": node.lineno, "function": where(node.lineno),
                                  "kind": "error line", "message": text.removeprefix("error: ")})
                continue
            if call is None:
                continue
            text = _text(call.args[0]) if call.args else None
            sites.append({"file": rel, "line": node.lineno, "function": where(node.lineno), "kind": kind,
                          "message": text or ""})
    return sites


def _group(rel: str) -> str:
    return next((key for key, _, prefixes in GROUPS if rel.startswith(prefixes)), "other")


def _clean(message: str) -> str:
    text = " ".join(message.split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def generate(root: Path = ROOT) -> str:
    sites = error_sites(root)
    lines = ["# Troubleshooting", "",
             "Every one-line error vase gives for a user's input, generated from the code's error sites by "
             "`python -m vase.reports.troubleshooting` (do not edit by hand: `make docs` fails when this page differs "
             "from the code). Each entry point prints one of these as one line, `config error: ...` for a value or key "
             "of the config and `error: ...` for a file or an input, exits with status 2 and records the reason in the "
             "run's folder; a run that was killed or interrupted is resumed by the same command. The message says what "
             "is wrong, names the file, key or id, and says what to do; `<...>` stands for what fills it in. Where a "
             "message is built elsewhere, only its site is listed.", "",
             "Before a long run, `VASE_CHECK_CONFIG=1 python train.py ...` checks the config and stops; "
             "`python -m vase.data.check <dataset>` lists every problem of a dataset at once.", ""]
    for key, title, _ in (*GROUPS, ("other", "Other", ())):
        mine = [s for s in sites if _group(str(s["file"])) == key]
        if not mine:
            continue
        lines += [f"## {title}", "", "| error | kind | where |", "|---|---|---|"]
        seen: set[str] = set()
        for s in sorted(mine, key=lambda s: (str(s["file"]), int(s["line"]))):
            message = _clean(str(s["message"])) or "(message built at run time)"
            if message in seen and s["message"]:
                continue
            seen.add(message)
            lines.append(f"| {message} | {s['kind']} | `{s['file']}` ({s['function']}) |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.reports.troubleshooting", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from what the code generates")
    a = ap.parse_args(argv)
    text = generate()
    if a.check:
        if (PAGE.read_text() if PAGE.is_file() else "") != text:
            print(f"{PAGE} differs from the code's error sites: run python -m vase.reports.troubleshooting",
                  file=sys.stderr)
            return 1
        print(f"{PAGE}: up to date")
        return 0
    atomic_write_text(PAGE, text)
    print(f"wrote {PAGE} ({len(error_sites())} error sites)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Atomic writes: a result file is either the old one or the new one, never half of each."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import io
import json
import os
import pickle
import re
import shlex
import shutil
import socket
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vase.errors import ConfigError, DataError, first_line


def _relative(path: str | Path, here: Path | None = None) -> str:
    """``path`` relative to ``here`` (the current folder) when it lies under it, else whole."""
    here, where = (here or Path.cwd()).resolve(), Path(path).resolve()
    return str(where.relative_to(here) if where.is_relative_to(here) else where)


def shown_path(path: str | Path, here: Path | None = None) -> str:
    """``path`` as a printed command names it, quoted for the shell: relative to ``here`` (the current folder) when
    it lies under it, as the docs write it, else whole.

    >>> shown_path("/srv/logs/train/multiruns/x", Path("/srv"))
    'logs/train/multiruns/x'
    >>> shown_path("/data/my runs/x", Path("/srv"))
    "'/data/my runs/x'"
    """
    return shlex.quote(_relative(path, here))


def shown_store(uri: str, here: Path | None = None) -> str:
    """A local MLflow store's URI as a printed command names it, quoted for the shell: a ``sqlite:///`` store under
    the current folder by its relative path (SQLAlchemy reads a relative one from where the command runs), a
    ``file:`` store as its folder (`shown_path`: MLflow takes a local path as a file store, and ``file://logs``
    would name a host); a server's URI, or a store elsewhere, as it is.

    >>> shown_store("sqlite:////srv/logs/mlflow.db", Path("/srv"))
    'sqlite:///logs/mlflow.db'
    >>> shown_store("sqlite:////elsewhere/mlflow.db", Path("/srv"))
    'sqlite:////elsewhere/mlflow.db'
    >>> shown_store("file:///srv/mlruns", Path("/srv")), shown_store("file:/srv/my runs", Path("/srv"))
    ('mlruns', "'my runs'")
    >>> shown_store("http://127.0.0.1:5000", Path("/srv"))
    'http://127.0.0.1:5000'
    """
    if uri.startswith("sqlite:///") and Path(uri[len("sqlite:///"):]).is_absolute():
        return shlex.quote("sqlite:///" + _relative(uri[len("sqlite:///"):], here))
    for scheme in ("file://", "file:"):
        if uri.startswith(scheme) and Path(uri[len(scheme):]).is_absolute():
            return shown_path(uri[len(scheme):], here)
    return shlex.quote(uri) if uri.startswith(("sqlite:", "file:")) else uri


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:  # a read-only or full folder: name the file meant, not the temporary one
        raise OSError(e.errno, e.strerror, str(path)) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are meant to be shared
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None:  # a full disk fails the write or flush, which name no file: name the one meant
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Text version of `atomic_write_bytes` (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_LINK_SCHEME = re.compile(r"\]\(\s*<?\s*(javascript|vbscript|data)\s*:", re.I)


def inert_markdown(text: str) -> str:
    """Markdown with nothing a viewer runs: outside code spans, a ``<`` that could open an HTML tag or comment becomes
    ``&lt;`` and a link to a ``javascript:``, ``vbscript:`` or ``data:`` target loses its scheme's colon. vase never
    writes raw HTML or such links itself, so what this changes came from a file or an override (a question's label, a
    swept value), which a report, MLflow's description or a viewer would otherwise render as written.

    >>> inert_markdown('label <img src=x onerror=alert(1)> and `code <b>`, p < 0.05, [a](javascript:alert(1))')
    'label &lt;img src=x onerror=alert(1)> and `code <b>`, p < 0.05, [a](javascript%3Aalert(1))'
    """
    def plain(part: str) -> str:
        return _LINK_SCHEME.sub(lambda m: m.group(0)[:-1] + "%3A", _TAG_START.sub("&lt;", part))

    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):  # a code span shows its text as it is: left alone
        out += [plain(text[at:m.start()]), m.group(0)]
        at = m.end()
    return "".join([*out, plain(text[at:])])


def write_markdown(path: str | Path, text: str) -> Path:
    """`atomic_write_text` of a Markdown page made `inert_markdown`: every report vase writes goes through it."""
    return atomic_write_text(path, inert_markdown(text))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


WRITTEN_BY = "written_by"
"""The key with which a JSON file that a vase tool writes at a path the user gave says which tool wrote it."""


def user_output(path: str | Path, flag: str, tool: str, force: bool = False) -> Path:
    """A file a command-line tool is about to write at a path the user named (``--json``, ``--report``): refused,
    in one line naming the flag, when a file is already there that ``tool`` did not write (a JSON without its
    ``written_by`` mark): a user's notes are never replaced. ``force`` (the tool's ``--force``) replaces it; a file
    this tool wrote before is rewritten. Write the file with ``{WRITTEN_BY: tool, ...}``.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "notes.md").write_text("mine"); _ = (d / "r.json").write_text('{"written_by": "vase.x"}')
    >>> user_output(d / "r.json", "--json", "vase.x") == d / "r.json"
    True
    >>> user_output(d / "notes.md", "--json", "vase.x")
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: --json ...notes.md: the file exists and vase.x did not write it; vase never replaces such a file: choose another path, or add --force to replace it
    """
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{flag} {p}: is a folder; give the path of a file")
    if force or not (p.exists() or p.is_symlink()):
        return p
    try:
        ours = json.loads(p.read_text(encoding="utf-8")).get(WRITTEN_BY) == tool
    except (OSError, ValueError, AttributeError):  # not JSON, not a dict, unreadable: not one of ours
        ours = False
    if not ours:
        raise ConfigError(f"{flag} {p}: the file exists and {tool} did not write it; vase never replaces such a file: "
                          f"choose another path, or add --force to replace it")
    return p


def user_output_dir(path: str | Path, flag: str, tool: str, mark: str) -> Path:
    """A folder a command-line tool writes into at a path the user named (``--out``): it must be new, empty, or one
    this tool wrote before (it holds ``mark``, the file the tool always leaves there); any other folder is refused in
    one line naming the flag (the user's files in it are never replaced). Returns the path."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p}: is a file; give a folder")
    if p.is_dir() and any(p.iterdir()) and not (p / mark).exists():
        raise ConfigError(f"{flag} {p}: the folder holds files and {tool} did not write it (no {mark}); give a new "
                          f"or empty folder")
    return p


def save_figure(fig: Any, path: str | Path, dpi: int | None = None) -> Path:
    """Write a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt  # lazy: matplotlib is heavy and only plots need it

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a syntax error is raised as a DataError naming the file, line and column."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e})") from e


BUILT_MARKER = ".vase-built"
"""Written into every directory `atomic_directory` builds: only such a directory may ever be replaced."""


def _builder_tag() -> str:
    """This process and machine, as the temporary folder of a build names them (``b<pid>-<host hash>``)."""
    return f"b{os.getpid()}-{hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def clear_stale_builds(path: str | Path) -> list[Path]:
    """The temporary folders (``.<name>.b<pid>-<host>.*`` beside ``path``) that builds of ``path`` killed mid-way
    left behind, removed: only folders whose name says a process of this machine made them and that process is gone,
    so a live build, another machine's, or anything vase did not make is never touched. Returns what was removed."""
    path = Path(path)
    host = _builder_tag().split("-", 1)[1]
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.b(\d+)-([0-9a-f]{{8}})\.")
    removed = []
    for d in path.parent.glob(f".{path.name}.b*"):
        m = pattern.match(d.name)
        if d.is_symlink() or not d.is_dir() or m is None or m.group(2) != host or _alive(int(m.group(1))):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def built_by_vase(path: str | Path) -> bool:
    """Whether ``path`` is a directory that `atomic_directory` built (it carries the marker file)."""
    return (Path(path) / BUILT_MARKER).is_file()


@contextlib.contextmanager
def atomic_directory(path: str | Path, replace: bool = False) -> Iterator[Path]:
    """Build a directory in a temporary sibling and move it into place only if the block succeeds.

    A model or adapter directory thus appears whole or not at all, and a failed build leaves the old one.
    An existing ``path`` is replaced only with ``replace=True`` *and* when vase built it (it carries
    `BUILT_MARKER`); anything else there (a user's checkpoint, a dataset) raises FileExistsError before any
    work is done, so no code path can delete a directory that vase did not make.

        with atomic_directory(out) as tmp:
            model.save_pretrained(tmp)
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not replace:
            raise FileExistsError(f"{path}: already exists; vase writes a new directory only where nothing is")
        if not built_by_vase(path):
            raise FileExistsError(f"{path}: exists and was not built by vase (no {BUILT_MARKER} file); "
                                  f"refusing to replace it. Choose another output path")
    path.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_builds(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{_builder_tag()}."))
    try:
        yield tmp
        (tmp / BUILT_MARKER).write_text("built by vase; this directory may be replaced by a later build\n")
        if path.exists():
            # swap by renames, then remove the old copy (which carries the marker: vase built it)
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old."))
            old.rmdir()
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                tmp.rename(path)
            except OSError as e:
                # another process (a sweep's job on another machine) moved the same build into place meanwhile:
                # keep theirs, whole, rather than swap it away under a reader
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not (replace and built_by_vase(path)):
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def own_output_dir(path: str | Path, key: str, inputs: tuple[str | Path, ...] = ()) -> Path:
    """Make ``path`` a folder vase writes into, or refuse: it must be new, empty, or built by vase earlier (it carries
    `BUILT_MARKER`, which this writes), and lie neither inside nor around any of ``inputs`` (only read).

    Raises ConfigError naming ``key``; a user's folder is never written into, and nothing found in it is taken as
    vase's own work (e.g. a GLB of the same name as "already done").
    """
    out = Path(path).expanduser().resolve()
    for src in inputs:
        if is_within(out, src) or is_within(src, out):
            raise ConfigError(f"{key}={out} lies inside the input {Path(src).resolve()} (or holds it), which is only "
                              f"read; choose an output folder outside it")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{key}={out} is a file; choose a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not built_by_vase(out):
        raise ConfigError(f"{key}={out} is a non-empty folder vase did not create (no {BUILT_MARKER}); choose a new "
                          f"or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    if not built_by_vase(out):
        (out / BUILT_MARKER).write_text("written by vase; a later run of the same command may add to it\n")
    return out


MAX_NAME_BYTES = 200
"""Longest id used as a file name as it is (a view adds ``.png``; most file systems stop at 255 bytes)."""
_DRIVE = re.compile(r"^[A-Za-z]:")


def name_problem(name: object) -> str | None:
    """Why ``name`` (an id or any other name read from data) cannot be a file name as it is; None when it can.

    Ids are data, never paths: a name with a separator, ``.``/``..``, NUL or control characters, a drive letter,
    a leading dot (a hidden file) or over `MAX_NAME_BYTES` bytes would steer or break a write.

    >>> name_problem("3f2a9c_7"), name_problem("vase 12")
    (None, None)
    >>> name_problem("../../escaped_by_id")
    "contains a path separator ('/')"
    >>> name_problem(".."), name_problem("C:evil")
    ('is a relative folder reference (..)', 'starts with a drive letter (C:)')
    """
    if not isinstance(name, str) or not name:
        return "is empty" if name == "" else f"is a {type(name).__name__}, not a string"
    if name in (".", ".."):
        return f"is a relative folder reference ({name})"
    for sep in ("/", "\\"):
        if sep in name:
            return f"contains a path separator ({sep!r})"
    if "\x00" in name:
        return "contains a NUL byte"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "contains a control character"
    if _DRIVE.match(name):
        return f"starts with a drive letter ({name[:2]})"
    if name.startswith("."):
        return "starts with '.' (a hidden file name)"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    return None


def safe_name(name: str) -> str:
    """The file name vase gives what ``name`` identifies: ``name`` itself when it is a plain file name
    (`name_problem`), else a cleaned stem plus a hash of the whole name, which is never a path. Records keep
    the original id; only file names are mapped, the same way for reading and writing.

    >>> safe_name("3f2a9c_7")
    '3f2a9c_7'
    >>> safe_name("../../escaped_by_id")
    'escaped_by_id-4a54db92adc84078'
    >>> "/" in safe_name("/etc/passwd") or safe_name("..").startswith(".")
    False
    """
    if name_problem(name) is None:
        return name
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", str(name)).strip("_")[:48] or "id"
    return f"{stem}-{hashlib.sha256(str(name).encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def relpath_problem(rel: str) -> str | None:
    """Why a relative path read from data (a record's ``model`` field) would reach outside its folder; None if not.

    >>> relpath_problem("models/v0001.glb"), relpath_problem("../../etc/x.glb"), relpath_problem("/etc/x.glb")
    (None, "has a '..' part", 'is absolute')
    """
    if "\x00" in rel or any(ord(c) < 32 for c in rel):
        return "contains a NUL byte or a control character"
    if rel.startswith(("/", "\\")) or _DRIVE.match(rel):
        return "is absolute"
    if ".." in re.split(r"[/\\]", rel):
        return "has a '..' part"
    return None


def inside(folder: str | Path, *parts: str) -> Path:
    """``folder / parts``, refused (DataError) when it would lie outside ``folder``: every writer that builds a path
    from names in data checks its final path with this before it opens it. The check is on the names (``..``, an
    absolute part), not on links the folder's owner made inside it.

    >>> inside("/out", "images", "front", "a.png").as_posix()
    '/out/images/front/a.png'
    >>> inside("/out", "images", "../../x.png")
    Traceback (most recent call last):
    vase.errors.DataError: /out/images/../../x.png: refusing to write outside /out (a name from the data steered the path: 'images/../../x.png')
    """
    path = Path(folder).joinpath(*parts)
    top = os.path.normpath(os.path.abspath(folder))
    if os.path.commonpath([top, os.path.normpath(os.path.abspath(path))]) != top:
        raise DataError(f"{path}: refusing to write outside {folder} (a name from the data steered the path: "
                        f"{'/'.join(parts)!r})")
    return path


def is_within(path: str | Path, parent: str | Path) -> bool:
    """Whether ``path`` lies inside ``parent`` (or is it), after resolving ``..`` and symbolic links."""
    try:
        Path(path).expanduser().resolve().relative_to(Path(parent).expanduser().resolve())
        return True
    except ValueError:
        return False


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the block; others wait."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def one_builder_at_a_time(build: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``build(out, ...)``, a builder that returns early when ``out`` already holds what it would build:
    processes building the same ``out`` (jobs of a parallel sweep filling one cache entry) take turns, so the second
    finds the first's result instead of racing it to the final rename. The lock lives in the user's temp folder,
    keyed by ``out``'s resolved path: nothing is ever left beside a path a user named. (Processes on other machines
    do not see it; for them `atomic_directory` keeps a build that another moved into place first.)"""
    @functools.wraps(build)
    def locked(out: str | Path, *args: Any, **kwargs: Any) -> Any:
        with path_lock(out, "build"):
            return build(out, *args, **kwargs)
    return locked


@contextlib.contextmanager
def path_lock(path: str | Path, kind: str) -> Iterator[None]:
    """An exclusive lock on what lives at ``path`` (a cache entry, a tracking store), held for the block; others on
    this machine wait. The lock file lives in the user's temp folder, keyed by ``kind`` and ``path``'s resolved path:
    nothing is ever left beside a path a user named."""
    key = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    with file_lock(Path(tempfile.gettempdir()) / f"vase-locks-{os.getuid()}" / f"{kind}-{key}.lock"):
        yield


def load_tensors(path: str | Path, key: str, **kwargs: Any) -> Any:
    """``torch.load`` of a file a user or a dataset supplies, with ``weights_only=True``: tensors, containers and plain
    values load; a pickled object that would run code (``__reduce__`` calling ``os.system``) is refused before any
    of it runs, as one line naming ``key`` and the file.

    Raises:
        ConfigError: the file holds pickled objects beyond tensors and plain values, or is not a torch file.
    """
    # lazy: torch is slow to import and most users of vase.io never load a tensor file
    import torch

    if kwargs.get("mmap") and Path(path).is_file() and not zipfile.is_zipfile(path):
        # torch's own words here are about its mmap option; the user gave a file that is no torch checkpoint at all
        raise ConfigError(f"{key}={path}: not a torch checkpoint (torch.save writes a zip archive, and this file is "
                          f"none); give a Lightning checkpoint (a run's checkpoints/last.ckpt)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True, **kwargs)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL (\S+)", str(e))
        if not found:  # not an object torch refused, but bytes that are no pickle at all
            why = re.search(r"WeightsUnpickler error:\s*(.+)", str(e))
            raise ConfigError(f"{key}={path}: not a readable torch file "
                              f"({why.group(1).strip() if why else type(e).__name__})") from None
        raise ConfigError(f"{key}={path}: refused: the file holds pickled objects that can run code"
                          f"{f' ({found.group(1)})' if found else ''}; vase loads only tensors and plain values "
                          f"(weights_only=True): save state dicts, or rebuild the file with vase") from None
    except (RuntimeError, EOFError, OSError) as e:
        first = first_line(e) or type(e).__name__
        raise ConfigError(f"{key}={path}: not a readable torch file ({first})") from None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file. A torn last line (a run killed mid-write) is dropped; any other bad line raises."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines) or (n == len(lines) - 1 and not lines[-1]):
                break  # the unfinished tail of an interrupted append: it will be generated again
            raise DataError(f"{path}: line {n} is not JSON ({e.msg})") from e
    return rows


def append_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` in one write, flushed and synced: a kill leaves whole lines plus at most one torn tail line
    (which `read_jsonl` drops and `repair_jsonl_tail` cuts before the next append)."""
    path = Path(path)
    before = path.stat().st_size if path.exists() else None
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a full disk: the file stays as it was (its whole lines), or absent, never half a write
        with contextlib.suppress(OSError):
            if before is None:
                path.unlink()
            else:
                os.truncate(path, before)
        raise OSError(e.errno, e.strerror, str(path)) if e.filename is None else e from e


def repair_jsonl_tail(path: str | Path) -> None:
    """Cut a torn final line so appends start on a fresh line."""
    path = Path(path)
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)

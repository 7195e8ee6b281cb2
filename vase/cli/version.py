"""``--version``: vase's version (from ``vase.__version__``, the one place it is set) with the code that runs."""

from __future__ import annotations

from pathlib import Path

import vase
from vase.runs import code_label, code_stamp


def version_line() -> str:
    """``vase 0.1.0 (commit 3f2a9c1d0e, /path/to/vase)``; an installed wheel has no commit: ``(installed, ...)``.

    >>> version_line().startswith(f"vase {vase.__version__} (")
    True
    """
    code = code_stamp()
    where = Path(vase.__file__).resolve().parent
    return (f"vase {vase.__version__} ({'commit ' + code_label(code) if code.get('commit') else 'installed'}, "
            f"{where})")

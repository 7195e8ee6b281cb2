"""``python -m vase.runs [ROOT ...]``: `vase.runs.describe.main`."""

from vase.runs.describe import main

raise SystemExit(main())

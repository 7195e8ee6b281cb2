"""``python -m vase.cli``: the ``vase`` command."""

import sys

from vase.cli import main

sys.exit(main())

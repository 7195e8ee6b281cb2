"""``python evaluate.py`` in a checkout runs `vase.cli.evaluate` (``vase evaluate`` once installed); its docstring shows the
commands."""

from vase.cli.evaluate import main

if __name__ == "__main__":
    main()

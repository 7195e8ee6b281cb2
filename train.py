"""``python train.py`` in a checkout runs `vase.cli.train` (``vase train`` once installed); its docstring shows the
commands."""

from vase.cli.train import main

if __name__ == "__main__":
    main()

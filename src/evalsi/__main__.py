"""``python -m evalsi``: the ``evalsi`` command where the scripts directory is not on PATH."""

from evalsi.cli import main

if __name__ == "__main__":  # importing the module (pkgutil, doctest collection) runs nothing
    raise SystemExit(main())

"""``python -m evalsi``: the ``evalsi`` command where the scripts directory is not on PATH."""

from evalsi.cli import main

raise SystemExit(main())

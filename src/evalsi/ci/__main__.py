"""``python -m evalsi.ci STEP``: one step of the GitHub Action."""

from evalsi.ci import main

if __name__ == "__main__":
    raise SystemExit(main())

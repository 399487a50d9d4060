"""User-written paths: ``~`` and ``~user`` expanded, or an error that says which user is unknown."""

from __future__ import annotations

from pathlib import Path

from evalsi.core._errors import UserError


def expand_home(text: str | Path, where: str = "") -> Path:
    """``text`` with a leading ``~`` or ``~user`` expanded, as a shell would.

    Example:
        >>> expand_home("data/qa.jsonl")
        PosixPath('data/qa.jsonl')

    Raises:
        UserError: ``~user`` names no user of this machine (or ``~`` has no home to go to);
            ``pathlib`` raises a bare RuntimeError there.
    """
    path = Path(text)
    try:
        return path.expanduser()
    except RuntimeError:
        user = str(text).split("/", 1)[0]
        at = f"{where}: " if where else ""
        raise UserError(
            f"{at}{str(text)!r}: {user} is not a home directory on this machine",
            hint="write the path out in full, or use ~/ for your own home",
        ) from None

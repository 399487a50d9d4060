"""Confinement of the paths a request names: a dataset path given to the server must resolve,
symlinks followed, to a file inside ``datasets_dir``; anything else is refused as bad input."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from evalsi.core import UserError


def confine(root: Path, name: str, *, what: str = "dataset path") -> Path:
    """``root / name`` resolved, or ``UserError`` when it would leave ``root``.

    Absolute paths, ``..`` segments and symlinks pointing outside are all refused the same way,
    so a request cannot read the server's own files.
    """
    if not name or "\x00" in name:
        raise UserError(f"{what} is empty or holds a NUL byte")
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        raise UserError(
            f"{what} {name!r} must be relative to the server's datasets_dir, without '..'",
            hint="upload the data with the DatasetService (evalsi.Client.create_dataset) "
            "and use the path it returns",
        )
    base = root.resolve()
    resolved = (base / pure).resolve()
    if not resolved.is_relative_to(base):
        raise UserError(f"{what} {name!r} resolves outside the server's datasets_dir")
    return resolved

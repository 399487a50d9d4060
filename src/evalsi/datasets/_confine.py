"""Confinement of the paths a request names: a dataset path given to the server must resolve,
symlinks followed, to a file inside ``datasets_dir``; anything else is refused as bad input.

Evaluators that read a file named by a param (a drift evaluator's ``baseline``) resolve it with
``param_file``: anywhere when embedded, and inside the confinement root while a server runs
(``param_files_confined``), so a request cannot make the server read its own files.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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


_ROOT: list[Path] = []  # the confinement roots in force, innermost last (empty: none)


@contextmanager
def param_files_confined(root: Path) -> Iterator[None]:
    """Confine ``param_file`` to ``root`` in this process until the block ends (a server's
    lifetime: request handlers and run threads alike)."""
    _ROOT.append(root)
    try:
        yield
    finally:
        _ROOT.remove(root)


def param_file(name: str, *, what: str) -> str:
    """The path an evaluator param names, confined to the server's datasets_dir when one is
    in force (``UserError`` naming ``what`` otherwise); unchanged when embedded."""
    if not _ROOT:
        return name
    return str(confine(_ROOT[-1], name, what=what))

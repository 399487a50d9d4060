"""Content hashes: dataset versions, spec hashes and cache keys are all ``sha256:<hex>``."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import orjson


class Hasher:
    """An incremental sha256 that prints as ``sha256:<hex>``; fed while streaming a file."""

    __slots__ = ("_h",)

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def hexdigest(self) -> str:
        return "sha256:" + self._h.hexdigest()


def content_hash(value: Any) -> str:
    """Hash of a JSON-able value with sorted keys, so equal data hashes equal.

    Example:
        >>> content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1})
        True
    """
    if isinstance(value, bytes):
        data = value
    else:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return "sha256:" + hashlib.sha256(data).hexdigest()


_CODE_SUFFIXES = frozenset({".py", ".json", ".yaml", ".j2", ".html", ".binpb"})


@functools.cache
def code_sha256() -> str:
    """The hash of the evaluating code: every source file of the installed ``evalsi`` package
    (its path, length and bytes, in path order), ``sha256:<hex>``.

    A run records it in its manifest and a bundle in its metadata; ``evalsi rescore`` compares
    it with the code installed now. Computed once per process (about 20 ms for 400 files): a
    process runs the code it imported, whatever changes on disk after.
    """
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _CODE_SUFFIXES):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        data = path.read_bytes()
        name = path.relative_to(root).as_posix().encode()
        h.update(len(name).to_bytes(4, "big") + name + len(data).to_bytes(8, "big"))
        h.update(data)
    return "sha256:" + h.hexdigest()

"""Content hashes: dataset versions, spec hashes and cache keys are all ``sha256:<hex>``."""

from __future__ import annotations

import hashlib
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

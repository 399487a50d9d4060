"""Datasets on disk: ``<datasets_dir>/<name>/sha256-<hex>.jsonl``, one file per version.

A version's file holds its rows as canonical JSON lines (keys sorted, compact), and the version
is the sha256 of exactly those bytes, so the same rows give the same version on any machine and
a run reading the file records that same version. Files are written to a temporary name and
renamed, so a reader never sees half a version. ``versions.json`` beside them lists the versions
oldest first (the last is the latest) with their row counts and creation times.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalsi.core import NotFoundError, UserError
from evalsi.datasets import confine

INDEX = "versions.json"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
VERSION = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Version:
    """One stored version of a dataset."""

    name: str
    version: str
    rows: int
    created: float

    @property
    def path(self) -> str:
        """Relative to datasets_dir: what a run spec's ``dataset.path`` names."""
        return f"{self.name}/{file_name(self.version)}"


def file_name(version: str) -> str:
    return version.replace(":", "-", 1) + ".jsonl"


def check_name(name: str, field: str = "name") -> str:
    if not NAME.fullmatch(name):
        raise UserError(
            f"{field}: {name!r} is not a dataset name",
            hint="use 1-128 lower-case letters, digits, '.', '_' or '-', starting with a "
            "letter or digit",
        )
    return name


def check_version(version: str, field: str = "version") -> str:
    if not VERSION.fullmatch(version):
        raise UserError(f"{field}: {version!r} is not a version; expected sha256:<64 hex digits>")
    return version


def canonical_lines(rows: Sequence[dict[str, Any]]) -> bytes:
    """The rows as canonical JSON lines: the bytes a version hashes.

    JSON has no NaN or infinity (orjson would write them as null, silently changing the data),
    so a row holding one is refused, naming where.
    """
    for i, row in enumerate(rows):
        _check_finite(row, f"rows[{i}]")
    option = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
    return b"".join(orjson.dumps(row, option=option) for row in rows)


def _check_finite(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where}: {value} is not a JSON number; store it as a string or null")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for j, item in enumerate(value):
            _check_finite(item, f"{where}[{j}]")


class DatasetFiles:
    """The datasets under one directory. Thread-safe: writers of one dataset take its lock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def _dir(self, name: str) -> Path:
        return confine(self.root, check_name(name), what="dataset name")

    # -- reading --------------------------------------------------------------------------------
    def versions(self, name: str) -> list[Version]:
        """Oldest first; ``NotFoundError`` for a dataset never stored."""
        entries = self._index(self._dir(name))
        if entries is None:
            raise NotFoundError(
                f"name: no dataset {name!r} on this server",
                hint="ListDatasets shows the datasets stored here",
            )
        return [Version(name, e["version"], int(e["rows"]), float(e["created"])) for e in entries]

    def get(self, name: str, version: str = "") -> Version:
        """A version (the latest when ``version`` is empty)."""
        found = self.versions(name)
        if not version:
            return found[-1]
        check_version(version)
        for v in found:
            if v.version == version:
                return v
        raise NotFoundError(f"version: dataset {name!r} has no version {version}")

    def latest(self) -> list[Version]:
        """The latest version of every dataset, by name."""
        if not self.root.is_dir():
            return []
        out = []
        for entry in sorted(self.root.iterdir()):
            if not NAME.fullmatch(entry.name) or not entry.is_dir():
                continue
            with contextlib.suppress(NotFoundError):
                out.append(self.versions(entry.name)[-1])
        return out

    def rows(self, v: Version, start: int, count: int) -> list[dict[str, Any]]:
        """Up to ``count`` rows from row ``start`` (0-based) of a version."""
        lines = itertools.islice(self._lines(v), start, start + count)
        return [orjson.loads(line) for line in lines]

    def _lines(self, v: Version) -> Iterator[bytes]:
        path = self._dir(v.name) / file_name(v.version)
        with path.open("rb") as f:
            yield from f

    def _index(self, folder: Path) -> list[dict[str, Any]] | None:
        try:
            data = orjson.loads((folder / INDEX).read_bytes())
        except FileNotFoundError:
            return None
        entries = data.get("versions") if isinstance(data, dict) else None
        return entries if isinstance(entries, list) and entries else None

    # -- writing --------------------------------------------------------------------------------
    def create(self, name: str, rows: Sequence[dict[str, Any]]) -> Version:
        """Store ``rows`` as a version of ``name`` (creating the dataset on first use)."""
        folder = self._dir(name)
        with self._lock(name):
            return self._store(name, folder, canonical_lines(rows), len(rows))

    def append(self, name: str, rows: Sequence[dict[str, Any]], base: str = "") -> Version:
        """A new version: the base version's rows (the latest by default), then ``rows``."""
        folder = self._dir(name)
        with self._lock(name):
            old = self.get(name, base)
            content = (folder / file_name(old.version)).read_bytes() + canonical_lines(rows)
            return self._store(name, folder, content, old.rows + len(rows))

    def _store(self, name: str, folder: Path, content: bytes, rows: int) -> Version:
        version = "sha256:" + hashlib.sha256(content).hexdigest()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / file_name(version)
        if not target.exists():  # content-addressed: an existing file already holds these bytes
            _write_atomic(target, content)
        existing: list[dict[str, Any]] = self._index(folder) or []
        previous = next((e for e in existing if e.get("version") == version), None)
        entries = [e for e in existing if e is not previous]
        created = float(previous["created"]) if previous else time.time()
        # The version named last is the latest, even when its bytes were stored before.
        entries.append({"version": version, "rows": rows, "created": created})
        _write_atomic(folder / INDEX, orjson.dumps({"versions": entries}))
        return Version(name, version, rows, created)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""Datasets on disk: ``<datasets_dir>/<name>/sha256-<hex>.jsonl``, one file per version.

A version's file holds its rows as canonical JSON lines (keys sorted, compact), and the version
is the sha256 of exactly those bytes, so the same rows give the same version on any machine and
a run reading the file records that same version. Files are written to a temporary name and
renamed, so a reader never sees half a version. ``versions.json`` beside them lists the versions
oldest first (the last is the latest) with their row counts and creation times.

With an object store (``objectStore:``), each version is also stored there, content-addressed
under ``datasets/<project>/<name>/sha256-<hex>`` by a conditional create (two replicas storing
the same version both succeed, one object is written). A replica asked for a version it lacks
(by version, or by a run spec's path) fetches it from there on first use, checks its hash, and
keeps it like one of its own, so replicas on one bucket share every version either stored.
Listings stay per replica: a version is found by its name and version, not listed, until this
replica has used it.
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
from evalsi.store import ObjectStore

INDEX = "versions.json"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
VERSION = re.compile(r"sha256:[0-9a-f]{64}")
# a version's path relative to datasets_dir, as a run spec names it
VERSION_PATH = re.compile(r"([a-z0-9][a-z0-9._-]{0,127})/sha256-([0-9a-f]{64})\.jsonl")
MAX_FETCH_BYTES = 1 << 34
"""The largest version fetched from the object store (16 GiB), a bound against a wrong key."""


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

    def __init__(
        self, root: Path, *, objects: ObjectStore | None = None, project: str = "default"
    ) -> None:
        self.root = root
        self.objects = objects
        self.project = project
        # re-entrant: an append holding its dataset's lock may fetch its base version
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def _lock(self, name: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(name, threading.RLock())

    def _dir(self, name: str) -> Path:
        return confine(self.root, check_name(name), what="dataset name")

    # -- reading --------------------------------------------------------------------------------
    def versions(self, name: str) -> list[Version]:
        """Oldest first; ``NotFoundError`` for a dataset never stored (here)."""
        entries = self._index(self._dir(name))
        if entries is None:
            raise NotFoundError(
                f"name: no dataset {name!r} on this server",
                hint="ListDatasets shows the datasets stored here",
            )
        return [Version(name, e["version"], int(e["rows"]), float(e["created"])) for e in entries]

    def _get(self, name: str, version: str) -> Version:
        found = self.versions(name)
        if not version:
            return found[-1]
        check_version(version)
        for v in found:
            if v.version == version:
                return v
        raise NotFoundError(f"version: dataset {name!r} has no version {version}")

    def get(self, name: str, version: str = "") -> Version:
        """A version (the latest when ``version`` is empty); one this replica lacks is fetched
        from the object store when one is configured."""
        try:
            return self._get(name, version)
        except NotFoundError:
            if not version or self.objects is None:
                raise
        check_version(version)
        with self._lock(name):
            return self._fetch(name, version)

    def fetch_path(self, path: str) -> bool:
        """Whether the version a run spec's ``dataset.path`` names (``NAME/sha256-HEX.jsonl``)
        is here now: fetched from the object store when it was not."""
        match = VERSION_PATH.fullmatch(path)
        if match is None or self.objects is None:
            return False
        try:
            self.get(match.group(1), f"sha256:{match.group(2)}")
        except NotFoundError:
            return False
        return True

    def _fetch(self, name: str, version: str) -> Version:
        """``version`` of ``name`` from the object store into this directory and its index."""
        from evalsi.store import ObjectError

        assert self.objects is not None
        folder = self._dir(name)
        with contextlib.suppress(NotFoundError):  # fetched meanwhile by another request
            return self._get(name, version)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / file_name(version)
        digest = version.removeprefix("sha256:")
        try:
            created = self.objects.download(
                self._space(name), digest, target, max_bytes=MAX_FETCH_BYTES
            )
        except ObjectError as e:
            if e.kind != "missing":
                raise
            raise NotFoundError(
                f"version: dataset {name!r} has no version {version} here nor in the object store"
            ) from None
        with target.open("rb") as f:
            rows = sum(1 for _ in f)
        entries = [e for e in self._index(folder) or [] if e.get("version") != version]
        entries.append({"version": version, "rows": rows, "created": created})
        entries.sort(key=lambda e: float(e["created"]))  # in the order they were first stored
        _write_atomic(folder / INDEX, orjson.dumps({"versions": entries}))
        return Version(name, version, rows, created)

    def _space(self, name: str) -> str:
        return f"datasets/{self.project}/{name}"

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
        if self.objects is not None:  # shared before it is listed: a version listed is fetchable
            self.objects.put(content, self._space(name))
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

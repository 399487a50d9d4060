"""The bundle format: its files, its version, and how they are written and read safely.

A bundle is one flat directory of regular files. Every content file is written first, each
hashed as it streams out; ``manifest.json`` (every file's path, size and sha256) is written
last, so its checksums cover them all and a bundle cut short has no manifest. Readers never
follow a link, never open a FIFO or a device, and never leave the directory: a hostile bundle
is a finding, not a way to read or write elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

FORMAT = "evalsi-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
METADATA = "metadata.json"
CONFIG = "config.json"
PLAN = "test_plan.json"
RECORDS = "records.jsonl"
TRAJECTORIES = "trajectories.jsonl"
TOOL_CALLS = "tool_calls.jsonl"
END_STATES = "end_states.jsonl"
SCORES = "scores.jsonl"
CASES = "cases.jsonl"
SUMMARY = "summary.json"
GATES = "gates.json"
REPORT = "report.md"

REQUIRED = (
    METADATA,
    CONFIG,
    PLAN,
    RECORDS,
    TRAJECTORIES,
    TOOL_CALLS,
    END_STATES,
    SCORES,
    CASES,
    SUMMARY,
    GATES,
    REPORT,
)
"""Every content file, in the order they are written (manifest.json comes after them all)."""
JSON_FILES = (METADATA, CONFIG, PLAN, SUMMARY, GATES)
JSONL_FILES = (RECORDS, TRAJECTORIES, TOOL_CALLS, END_STATES, SCORES, CASES)
KNOWN = frozenset((*REQUIRED, MANIFEST, SIGNATURE))

MAX_JSON_BYTES = 256 << 20
"""Largest JSON file (or JSONL line) a reader parses; a bigger one is a finding."""
CHUNK = 1 << 20


def dumps(value: Any) -> bytes:
    """The bytes of one JSON document of the bundle: sorted keys, two-space indent, newline."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def line(value: Any) -> bytes:
    """One JSONL line: sorted keys, no spaces, newline."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) + b"\n"


@dataclass(frozen=True, slots=True)
class Entry:
    """One file as the manifest lists it."""

    path: str
    size: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


class HashedFile:
    """A new file in the bundle, hashed and counted while it is written.

    Created with ``O_EXCL | O_NOFOLLOW``: a name planted in the directory (a link to somewhere
    else) makes the write fail instead of landing outside the bundle.
    """

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(directory / name, flags, 0o644)
        self._file: IO[bytes] = os.fdopen(fd, "wb", buffering=CHUNK)
        self._hash = hashlib.sha256()
        self.size = 0
        self.lines = 0

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._hash.update(data)
        self.size += len(data)
        self.lines += 1

    def close(self) -> Entry:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return Entry(self.name, self.size, "sha256:" + self._hash.hexdigest())

    def abandon(self) -> None:
        self._file.close()


class Unsafe(Exception):
    """A bundle entry that is not a plain regular file inside the bundle."""


def safe_name(name: str) -> bool:
    """Whether ``name`` is a plain file name: no separator, no ``..``, no NUL, not absolute."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and not name.startswith("~")
    )


def open_regular(directory: Path, name: str) -> IO[bytes]:
    """``directory/name`` opened for reading, only if it is a regular file (never a link, a
    FIFO or a device, which ``O_NONBLOCK`` keeps from blocking the open); else ``Unsafe``."""
    if not safe_name(name):
        raise Unsafe(f"{name!r} is not a plain file name")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(directory / name, flags)
    except OSError as e:
        if e.errno in (40, 31):  # ELOOP: a symbolic link
            raise Unsafe(f"{name} is a symbolic link") from e
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unsafe(f"{name} is not a regular file ({_kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=CHUNK)
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def entry_kind(directory: Path, name: str) -> str | None:
    """What ``directory/name`` is when it is not a regular file (lstat: links not followed)."""
    mode = os.lstat(directory / name).st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return _kind(mode)


def hash_file(directory: Path, name: str) -> Entry:
    """Size and sha256 of a regular file of the bundle, streamed."""
    h = hashlib.sha256()
    size = 0
    with open_regular(directory, name) as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Entry(name, size, "sha256:" + h.hexdigest())


def read_json(directory: Path, name: str) -> Any:
    """A JSON file of the bundle; ``ValueError`` when it is too large or not JSON."""
    with open_regular(directory, name) as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES} bytes")
    return orjson.loads(data)


def read_bytes(directory: Path, name: str, limit: int = MAX_JSON_BYTES) -> bytes:
    with open_regular(directory, name) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def iter_lines(directory: Path, name: str) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each line of a JSONL file; ``ValueError`` naming the line
    when one is not JSON or too long."""
    with open_regular(directory, name) as f:
        for number, raw in enumerate(f, 1):
            if len(raw) > MAX_JSON_BYTES:
                raise ValueError(f"line {number} is longer than {MAX_JSON_BYTES} bytes")
            try:
                yield number, orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise ValueError(f"line {number} is not JSON ({e.msg})") from e


__all__ = [
    "CASES",
    "CONFIG",
    "END_STATES",
    "FORMAT",
    "FORMAT_VERSION",
    "GATES",
    "JSONL_FILES",
    "JSON_FILES",
    "KNOWN",
    "MANIFEST",
    "METADATA",
    "PLAN",
    "RECORDS",
    "REPORT",
    "REQUIRED",
    "SCORES",
    "SIGNATURE",
    "SUMMARY",
    "TOOL_CALLS",
    "TRAJECTORIES",
    "Entry",
    "HashedFile",
    "Unsafe",
    "dumps",
    "entry_kind",
    "hash_file",
    "iter_lines",
    "line",
    "open_regular",
    "read_bytes",
    "read_json",
    "safe_name",
]

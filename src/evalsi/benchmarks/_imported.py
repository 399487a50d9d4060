"""What every benchmark importer shares: reading a benchmark's files with errors that name the
file and the field, and writing what it made (a JSONL dataset, an EvalRun spec beside it)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalsi.core import UserError

MAX_FILE_BYTES = 16 << 20
"""Largest benchmark file read, in bytes: a task's files are small; a dump is not a task."""


@dataclass(frozen=True, slots=True)
class Imported:
    """What an importer wrote: the dataset, the spec that runs or grades it (``None`` when the
    benchmark's records are graded with ``evalsi eval`` instead), and how many rows."""

    dataset: Path
    spec: Path | None
    count: int


def read_text(path: Path, what: str) -> str:
    """A benchmark file as UTF-8 text, or a ``UserError`` naming it and why it cannot be read."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: the {what} is missing") from None
    except IsADirectoryError:
        raise UserError(f"{path}: the {what} is a directory, expected a file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"{path}: the {what} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: the {what} is not UTF-8 text (byte {e.start})") from None


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; a ``UserError`` with the line otherwise."""
    try:
        value = yaml.safe_load(read_text(path, what))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise UserError(f"{path}{at}: the {what} is not valid YAML: {problem}") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: the {what} must be a mapping, got {type(value).__name__}")
    return value


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file as a dict; a ``UserError`` naming the file and the line otherwise."""
    try:
        return tomllib.loads(read_text(path, what))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: the {what} is not valid TOML: {e}") from None


def read_json_lines(path: Path, what: str) -> list[dict[str, Any]]:
    """A JSON-lines file (blank lines skipped) of objects; a ``UserError`` naming the line."""
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(read_text(path, what).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: the {what} is not JSON lines: {e.msg}") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def field_of(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``data[key]`` of the given type, or a ``UserError`` naming ``where`` and the field."""
    if key not in data:
        raise UserError(f"{where}: the field {key!r} is missing")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        names = " or ".join(k.__name__ for k in _kinds(kind))
        raise UserError(f"{where}: the field {key!r} must be {names}, got {type(value).__name__}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def unique_ids(ids: Iterable[str], where: str) -> None:
    """A ``UserError`` naming the first id seen twice: a dataset's ids are its samples' keys."""
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise UserError(f"{where}: the id {i!r} appears twice; sample ids must be unique")
        seen.add(i)


def write_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """The rows as JSON lines (UTF-8); how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
            count += 1
    return count


def write_spec(path: Path, spec: Mapping[str, Any], header: str) -> None:
    """An EvalRun spec as YAML, with a comment on top saying where it came from."""
    comment = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
    body = yaml.safe_dump(dict(spec), sort_keys=False, allow_unicode=True, width=100)
    path.write_text(comment + body, encoding="utf-8")

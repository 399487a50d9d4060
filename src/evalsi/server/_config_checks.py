"""The checks every section of ``evalsi.yaml`` is read with: each problem is collected with its
key path (``Problems``), and the whole file is refused at once with all of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evalsi.core import SpecError
from evalsi.specs import parse_duration, read_spec_text


class Problems:
    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.lines: list[str] = []

    def bad(self, at: str, message: str) -> None:
        self.lines.append(f"{self.shown}: {at}: {message}" if at else f"{self.shown}: {message}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise SpecError("\n".join(self.lines))


def show(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value + '"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return str(value)


def as_mapping(p: Problems, at: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        p.bad(at, f"expected a mapping, got {show(value)}")
        return {}
    for key in value:
        if key not in allowed:
            where = f"{at}.{key}" if at else str(key)
            p.bad(where, f"unknown field {key!r} (expected one of: {', '.join(allowed)})")
    return value


def as_int(
    p: Problems, at: str, section: dict[str, Any], key: str, lo: int, hi: int, default: int
) -> int:
    """``section[key]`` (``at.key`` in messages), an integer ``lo``-``hi``; absent: ``default``."""
    value = section.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        p.bad(f"{at}.{key}", f"expected an integer {lo}-{hi}, got {show(value)}")
        return default
    return value


def as_text(p: Problems, at: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        p.bad(at, f"expected a non-empty string, got {show(value)}")
        return None
    return value


def as_duration(p: Problems, at: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    seconds = parse_duration(value) if isinstance(value, str) else None
    if seconds is None:
        p.bad(at, f"expected a duration such as 5s, 500ms or 2m, got {show(value)}")
        return default
    return seconds


def as_ttl(p: Problems, at: str, value: Any) -> float | None:
    """A retention: a duration (7d, 12h) or ``never``."""
    if value == "never":
        return None
    seconds = as_duration(p, at, value, 0.0)
    if seconds <= 0:
        p.bad(at, f"expected a positive duration such as 7d or 12h, or never, got {show(value)}")
        return None
    return seconds


def read_config(path: Path) -> Any:
    """The YAML document of a config file (UTF-8, at most 1 MiB), or a ``SpecError`` naming it."""
    text = read_spec_text(path, str(path), what="config")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{path}{where}: not valid YAML: {problem}") from e

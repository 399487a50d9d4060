"""What a judge sees of a record: a declared projection of its parts, with a byte budget.

A judge evaluator given ``evidence: {include: [...], max_bytes: N}`` shows its judge only the
parts of the record the projection includes. The projected parts are measured as canonical
JSON (sorted keys, no spaces, UTF-8 unescaped): over ``max_bytes`` the judge is not asked and
the record is SKIPPED as ``unavailable(over_budget): ...``. Evidence is never cut to fit: a
verdict on a record the judge saw only part of would read as a verdict on the whole record.

The projection's fingerprint (its version, include list and budget, and the projected bytes)
is part of the judge cache key, so two projections of one record never share an answer, even
when they render the same prompt. Without the param an evaluator shows what it always did,
under the cache keys it always had.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalsi.core import JsonValue, ParamError, Record, Step, Trajectory, content_hash
from evalsi.evaluators import Skip

PROJECTION_VERSION = "evidence-projection/v1"
"""How parts become evidence; a change to that is a new version (and so new cache keys)."""

PARTS = (
    "input",
    "output",
    "reference",
    "context",
    "trajectory.steps",
    "trajectory.tool_calls",
    "trajectory.stop_reason",
    "trajectory.checks",
    "trajectory.end_state",
)
"""The parts a projection may include, besides ``metadata.<key>``."""

METADATA = "metadata."
_KEYS = ("include", "max_bytes")
_JSON = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def canonical_bytes(value: Any) -> bytes:
    """``value`` as compact JSON with sorted keys, non-ASCII text as UTF-8 (never ``\\u``
    escapes): equal values give equal bytes, in any process."""
    return orjson.dumps(value, option=_JSON)


class Unavailable(Skip):
    """A ``Skip`` for a record whose evidence cannot be shown to the judge (``code``, e.g.
    ``over_budget``): the reason reads ``unavailable(<code>): <why>``, as ``NotMeasured``'s
    reads ``not_measured(<code>): ...``."""

    def __init__(self, code: str, why: str) -> None:
        super().__init__(f"unavailable({code}): {why}")
        self.code = code


@dataclass(frozen=True, slots=True)
class Evidence:
    """A record's projected parts: ``json_text`` is their canonical JSON, ``size`` its UTF-8
    bytes, ``fingerprint`` the hash the judge cache key holds."""

    parts: dict[str, JsonValue]
    json_text: str
    size: int
    fingerprint: str
    projection: Projection

    @property
    def over_budget(self) -> bool:
        limit = self.projection.max_bytes
        return limit is not None and self.size > limit

    def sections(self, shown: Collection[str]) -> str:
        """``# <part>`` sections for the parts a prompt has no section of its own for (those
        not in ``shown``): a string as is, anything else as its canonical JSON."""
        out = []
        for part, value in self.parts.items():
            if part in shown:
                continue
            text = value if isinstance(value, str) else canonical_bytes(value).decode()
            out.append(f"\n# {part}\n{text}\n")
        return "".join(out)

    def summary(self) -> dict[str, JsonValue]:
        """What a judged score records of the evidence its judge saw."""
        return {**self.projection.identity(), "size": self.size, "fingerprint": self.fingerprint}


@dataclass(frozen=True, slots=True)
class Projection:
    """Which parts of a record a judge sees (``include``, in any order) and how many bytes of
    evidence it may be shown (``max_bytes``; None: no limit).

    Example:
        >>> from evalsi.core import Content
        >>> record = Record(id="r", input=Content.of_text("Où ?"), output=Content.of_text("Ici"))
        >>> ev = Projection(("output", "input"), max_bytes=64).project(record)
        >>> ev.json_text, ev.size
        ('{"input":"Où ?","output":"Ici"}', 32)
    """

    include: tuple[str, ...]
    max_bytes: int | None = None
    version: str = PROJECTION_VERSION
    _parts: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for part in self.include:
            if not is_part(part):
                raise ValueError(f"unknown evidence part {part!r}")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {self.max_bytes}")
        object.__setattr__(self, "include", tuple(sorted(set(self.include))))
        object.__setattr__(self, "_parts", frozenset(self.include))

    def identity(self) -> dict[str, JsonValue]:
        return {"version": self.version, "include": list(self.include), "max_bytes": self.max_bytes}

    def project(self, record: Record) -> Evidence:
        """The record's included parts that it has (a part it lacks is left out, not null)."""
        parts = {p: v for p in self.include if (v := _part(record, p)) is not None}
        try:
            data = canonical_bytes(parts)
        except TypeError as e:  # a value JSON cannot hold: an object, an int past 64 bits
            raise ValueError(f"evidence of record {record.id!r} is not JSON: {e}") from e
        fingerprint = content_hash(
            {"projection": self.identity(), "evidence": hashlib.sha256(data).hexdigest()}
        )
        return Evidence(parts, data.decode(), len(data), fingerprint, self)

    def apply(self, record: Record) -> tuple[Record, Evidence]:
        """The record as the judge may see it (the parts left out emptied) and its evidence;
        ``Unavailable`` over the budget, before any judge is asked."""
        evidence = self.project(record)
        if evidence.over_budget:
            raise Unavailable(
                "over_budget",
                f"evidence is {evidence.size} bytes, the projection allows {self.max_bytes}",
            )
        return self._record(record), evidence

    def _record(self, record: Record) -> Record:
        has = self._parts.__contains__
        trajectory = None
        if record.trajectory is not None and any(p.startswith("trajectory.") for p in self._parts):
            t = record.trajectory
            steps = t.steps if has("trajectory.steps") else []
            if has("trajectory.tool_calls"):
                steps = [s for s in t.steps if _is_call(s)]
            trajectory = Trajectory(
                steps=list(steps),
                stop_reason=t.stop_reason if has("trajectory.stop_reason") else "",
                checks=list(t.checks) if has("trajectory.checks") else [],
                end_state=t.end_state if has("trajectory.end_state") else None,
            )
        return Record(
            id=record.id,
            input=record.input if has("input") else None,
            output=record.output if has("output") else None,
            reference=record.reference if has("reference") else None,
            context=list(record.context) if has("context") else [],
            trajectory=trajectory,
            metadata={k: v for k, v in record.metadata.items() if has(METADATA + k)},
            provenance=record.provenance,
        )


def is_part(name: str) -> bool:
    return name in PARTS or (name.startswith(METADATA) and len(name) > len(METADATA))


def _is_call(step: Step) -> bool:
    return step.kind == "tool_call" or step.tool_call is not None


def _part(record: Record, part: str) -> JsonValue:
    """The JSON of one part of ``record``; None when the record lacks it."""
    if part in ("input", "output", "reference"):
        content = getattr(record, part)
        return None if content is None else content.to_value()
    if part == "context":
        return [c.to_value() for c in record.context] or None
    if part.startswith(METADATA):
        value: JsonValue = record.metadata.get(part[len(METADATA) :])
        return value
    t = record.trajectory
    if t is None:
        return None
    if part == "trajectory.steps":
        return [s.to_value() for s in t.steps] or None
    if part == "trajectory.tool_calls":
        return [s.to_value() for s in t.steps if _is_call(s)] or None
    if part == "trajectory.stop_reason":
        return t.stop_reason or None
    if part == "trajectory.checks":
        return [c.to_value() for c in t.checks] or None
    return t.end_state  # trajectory.end_state


def projection_param(
    evaluator: str,
    value: Mapping[str, Any] | None,
    *,
    default: Sequence[str],
    requires: Iterable[str] = (),
    shows: Collection[str] | None = None,
) -> Projection | None:
    """The projection an ``evidence`` param declares (None without one); a ``ParamError`` naming
    the bad key otherwise.

    ``default`` is what the evaluator shows without the param, ``requires`` the parts it
    cannot judge without, ``shows`` the parts it has a place for (None: any part; the ones its
    prompt has no section for get a ``# <part>`` section of their own).
    """
    if value is None:
        return None
    where = f"{evaluator}: param 'evidence"
    for key in value:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1)
            raise ParamError(
                f"{where}' has an unknown key {key!r} (known: {', '.join(_KEYS)})",
                hint=f"did you mean {close[0]!r}?" if close else None,
            )
    include = value.get("include", list(default))
    if (
        not isinstance(include, (list, tuple))
        or not include
        or not all(isinstance(p, str) for p in include)
    ):
        raise ParamError(f"{where}.include' must be a non-empty list of parts, got {include!r}")
    for part in include:
        _check_part(where, evaluator, part, shows)
    if {"trajectory.steps", "trajectory.tool_calls"} <= set(include):
        raise ParamError(
            f"{where}.include' lists both 'trajectory.steps' and 'trajectory.tool_calls': "
            "the steps hold the tool calls, pick one"
        )
    for part in requires:
        if part not in include:
            raise ParamError(f"{where}.include' must list {part!r}: {evaluator} needs it")
    limit = value.get("max_bytes")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ParamError(f"{where}.max_bytes' must be a whole number of bytes >= 0, got {limit!r}")
    return Projection(tuple(include), limit)


def _check_part(where: str, evaluator: str, part: str, shows: Collection[str] | None) -> None:
    if not is_part(part):
        known = [*PARTS, "metadata.<key>"]
        close = difflib.get_close_matches(part, known, n=1)
        raise ParamError(
            f"{where}.include' has an unknown part {part!r} (parts: {', '.join(known)})",
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    if shows is not None and part not in shows:
        raise ParamError(
            f"{where}.include': {evaluator} cannot show its judge {part!r} "
            f"(it shows: {', '.join(shows)})"
        )


def projected(projection: Projection | None, record: Record) -> tuple[Record, Evidence | None]:
    """``projection.apply(record)``, or the record as it is when there is no projection."""
    if projection is None:
        return record, None
    return projection.apply(record)

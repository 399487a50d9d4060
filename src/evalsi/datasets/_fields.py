"""From a source row (a dict) to a ``Record``: the field map and the conversion.

This is the hot path of every dataset reader: a benchmark streams a million rows through
``build_record``. The field map is compiled once into a ``Plan`` (kept on the ``FieldMap``), so a
row costs a handful of dict lookups and object constructions; nothing is copied that need not be.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final, cast, get_args

import orjson

from evalsi.core import (
    Check,
    Content,
    DatasetError,
    Provenance,
    Record,
    Step,
    StepKind,
    ToolCall,
    Trajectory,
    Usage,
    UserError,
)


class RowError(ValueError):
    """A row (or one of its fields) cannot become a record; the message says why.

    Readers turn it into a ``DatasetError`` at the row's line, or count it when skipping.
    """


@dataclass(frozen=True)
class FieldMap:
    """Which key of a source row holds each part of a record.

    A name may be a dotted path into nested objects (``"response.text"``); a key that literally
    contains the dots wins over the nested lookup. ``None`` means the field is never read.
    While ``reference`` keeps its default, a row without a ``reference`` key falls back to
    ``expected``. Top-level keys that no field reads are kept in ``metadata``; on a clash, the
    row's own ``metadata`` object wins.

    Example:
        >>> fm = FieldMap(output="response.text")
        >>> record_from_dict({"input": "hi", "response": {"text": "hello"}, "lang": "en"},
        ...                  fm, line=1, path="chat.jsonl").output.text
        'hello'
    """

    input: str | None = "input"
    output: str | None = "output"
    reference: str | None = "reference"
    id: str | None = "id"
    context: str | None = "context"
    metadata: str | None = "metadata"
    usage: str | None = "usage"
    trajectory: str | None = "trajectory"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            name = getattr(self, f.name)
            if name is None:
                continue
            if not isinstance(name, str) or not name or "" in name.split("."):
                raise UserError(
                    f"field map: {f.name} = {name!r} is not a usable key",
                    hint="use a key name or a dotted path such as 'response.text'",
                )

    @cached_property
    def _plan(self) -> Plan:
        # cached_property writes straight into the instance __dict__, which a frozen
        # dataclass allows; after the first use this is a plain attribute lookup.
        return Plan(self)


def plan_of(fields: FieldMap) -> Plan:
    """The compiled form of a field map (computed once per ``FieldMap``)."""
    return fields._plan


_NEVER: Final = object()
"""A dict key no row can hold: the lookup key of a field that is switched off."""

_FALLBACK_REFERENCE = "expected"


class Plan:
    """A ``FieldMap`` compiled for fast lookups."""

    __slots__ = (
        "consumed",
        "consumed_with_fallback",
        "flat",
        "keys",
        "names",
        "paths",
        "ref_fallback",
    )

    def __init__(self, fm: FieldMap) -> None:
        order = (
            fm.id,
            fm.input,
            fm.output,
            fm.reference,
            fm.context,
            fm.metadata,
            fm.usage,
            fm.trajectory,
        )
        self.names: tuple[str, ...] = tuple(n or "" for n in order)
        self.keys: tuple[Any, ...] = tuple(_NEVER if n is None else n for n in order)
        self.paths: tuple[tuple[str, ...] | None, ...] = tuple(
            None if n is None else tuple(n.split(".")) for n in order
        )
        self.flat = all(n is None or "." not in n for n in order)
        self.ref_fallback = fm.reference == "reference"
        top = frozenset(n.split(".", 1)[0] for n in order if n is not None)
        self.consumed = top
        self.consumed_with_fallback = top | {_FALLBACK_REFERENCE}

    def resolve(self, row: dict[str, Any]) -> list[Any]:
        """The eight raw values (id, input, ..., trajectory) of a row with dotted paths."""
        out: list[Any] = []
        for name, path in zip(self.names, self.paths, strict=True):
            if path is None:
                out.append(None)
            elif len(path) == 1 or name in row:
                out.append(row.get(name))
            else:
                out.append(_dig(row, path, name))
        return out


def _dig(row: dict[str, Any], path: tuple[str, ...], name: str) -> Any:
    cur: Any = row
    for i, key in enumerate(path):
        if cur is None:
            return None
        if not isinstance(cur, dict):
            where = ".".join(path[:i])
            raise _unusable(name, f"{where!r} to be an object", cur)
        cur = cur.get(key)
    return cur


def record_from_dict(row: dict[str, Any], fields: FieldMap, *, line: int, path: str) -> Record:
    """Turn one source row into a ``Record``.

    ``line`` is where the row sits in its source (1-based); it is recorded in the provenance and
    becomes the id when the row has none. A field that is absent (or null) stays ``None`` on the
    record; a field that is present but unusable raises ``DatasetError`` naming the file, the line,
    the field and what was expected.

    Example:
        >>> r = record_from_dict({"id": 7, "input": "2+2?", "expected": "4"}, FieldMap(),
        ...                      line=3, path="qa.jsonl")
        >>> (r.id, r.reference.text, r.provenance.line)
        ('7', '4', 3)
    """
    if not isinstance(row, dict):
        raise DatasetError(f"expected an object, got {describe(row)}", path=path, line=line)
    try:
        return build_record(row, plan_of(fields), line, path, 0)
    except RowError as e:
        raise DatasetError(str(e), path=path, line=line) from None


def build_record(row: dict[str, Any], plan: Plan, line: int, path: str, id_offset: int) -> Record:
    """``record_from_dict`` for readers: takes the compiled plan and raises ``RowError``.

    A row without an id gets ``line + id_offset`` (readers of several files offset the lines so
    generated ids stay unique).
    """
    if plan.flat:
        get = row.get
        keys = plan.keys
        rid = get(keys[0])
        inp = get(keys[1])
        out = get(keys[2])
        ref = get(keys[3])
        ctx = get(keys[4])
        meta = get(keys[5])
        usage = get(keys[6])
        traj = get(keys[7])
    else:
        rid, inp, out, ref, ctx, meta, usage, traj = plan.resolve(row)

    consumed = plan.consumed
    if ref is None and plan.ref_fallback:
        ref = row.get(_FALLBACK_REFERENCE)
        if ref is not None:
            consumed = plan.consumed_with_fallback

    if type(rid) is str:
        if not rid:
            raise _unusable(plan.names[0], "a non-empty string", rid)
    elif rid is None:
        rid = str(line + id_offset)
    elif type(rid) is int:
        rid = str(rid)
    else:
        raise _unusable(plan.names[0], "a string or an integer", rid)

    if inp is not None:
        inp = Content("text", inp) if type(inp) is str else _content(inp, plan.names[1])
    if out is not None:
        out = Content("text", out) if type(out) is str else _content(out, plan.names[2])
    if ref is not None:
        ref = Content("text", ref) if type(ref) is str else _content(ref, plan.names[3])

    context: list[Content] = [] if ctx is None else _context(ctx, plan.names[4])

    if consumed.issuperset(row):
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise _unusable(plan.names[5], "an object", meta)
    else:
        extra = {k: v for k, v in row.items() if k not in consumed}
        if meta is None:
            meta = extra
        elif isinstance(meta, dict):
            extra.update(meta)
            meta = extra
        else:
            raise _unusable(plan.names[5], "an object", meta)

    if usage is not None:
        usage = _usage(usage, plan.names[6])
    if traj is not None:
        traj = _trajectory(traj, plan.names[7])

    # Positional arguments: keywords cost ~0.6 µs a row here. A test pins the field order.
    return Record(
        rid, inp, out, ref, context, traj, usage, meta, Provenance("dataset", path, "", line)
    )


# -- the structured fields ---------------------------------------------------------------------


def _unusable(name: str, expected: str, value: Any) -> RowError:
    return RowError(f"field {name!r}: expected {expected}, got {describe(value)}")


def _content(value: Any, name: str) -> Content:
    try:
        return Content.from_value(value)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RowError(f"field {name!r}: not a usable value ({e!r}): {describe(value)}") from None


def _context(value: Any, name: str) -> list[Content]:
    if type(value) is str:
        return [Content("text", value)]
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            if type(item) is str:
                items.append(Content("text", item))
            elif item is None:
                raise RowError(f"field '{name}[{i}]': expected a passage, got null")
            else:
                items.append(_content(item, f"{name}[{i}]"))
        return items
    if isinstance(value, dict):
        return [_content(value, name)]
    raise _unusable(name, "a list of passages or a string", value)


_COUNT = "a non-negative integer"
_AMOUNT = "a non-negative number"

# source key -> (Usage attribute, whether it counts tokens)
_USAGE_KEYS: Final[dict[str, tuple[str, bool]]] = {
    "input_tokens": ("input_tokens", True),
    "output_tokens": ("output_tokens", True),
    "total_tokens": ("total_tokens", True),
    "cost_usd": ("cost_usd", False),
    "latency_ms": ("latency_ms", False),
    # OpenAI's names for the same counts
    "prompt_tokens": ("input_tokens", True),
    "completion_tokens": ("output_tokens", True),
}


def _usage(value: Any, name: str) -> Usage:
    if not isinstance(value, dict):
        raise _unusable(name, "an object with token counts", value)
    usage = Usage()
    for key, v in value.items():
        spec = _USAGE_KEYS.get(key)
        if spec is None:
            raise RowError(
                f"field '{name}.{key}': unknown usage key; expected one of "
                "input_tokens, output_tokens, total_tokens, cost_usd, latency_ms"
            )
        if v is None:
            continue
        attr, is_count = spec
        t = type(v)
        if is_count:
            if t is float and v.is_integer():
                v = int(v)
            elif t is not int:
                raise _unusable(f"{name}.{key}", _COUNT, v)
            if v < 0:
                raise _unusable(f"{name}.{key}", _COUNT, v)
        else:
            if t is not float and t is not int:
                raise _unusable(f"{name}.{key}", _AMOUNT, v)
            if not (v >= 0 and math.isfinite(v)):  # also rejects NaN
                raise _unusable(f"{name}.{key}", _AMOUNT, v)
            v = float(v)
        setattr(usage, attr, v)
    return usage


_STEP_KINDS: Final = frozenset(get_args(StepKind))
_STEP_KEYS: Final = frozenset(f.name for f in dataclasses.fields(Step))  # a row per Step field


def read_trajectory(value: Any, name: str = "trajectory", *, stored: bool = False) -> Trajectory:
    """A trajectory from its JSON form (``Trajectory.to_value``, or a plain list of steps);
    ``RowError`` (a ``ValueError``) naming the field when it is not one. ``stored``: one a run
    recorded, whose tool calls may name no tool (an agent sent them so)."""
    return _trajectory(value, name, stored)


_TRAJECTORY_KEYS: Final = frozenset({"steps", "stop_reason", "checks", "end_state"})


def _trajectory(value: Any, name: str, stored: bool = False) -> Trajectory:
    if isinstance(value, list):
        return Trajectory([_step(s, f"{name}[{i}]", stored) for i, s in enumerate(value)])
    if not isinstance(value, dict) or "steps" not in value or not value.keys() <= _TRAJECTORY_KEYS:
        raise _unusable(name, "a list of steps, or {steps, stop_reason, checks, end_state}", value)
    steps = value["steps"]
    if not isinstance(steps, list):
        raise _unusable(f"{name}.steps", "a list of steps", steps)
    checks = value.get("checks", [])
    if not isinstance(checks, list):
        raise _unusable(f"{name}.checks", "a list of {name, passed, detail}", checks)
    return Trajectory(
        [_step(s, f"{name}.steps[{i}]", stored) for i, s in enumerate(steps)],
        _str(value.get("stop_reason"), f"{name}.stop_reason"),
        [_check(c, f"{name}.checks[{i}]") for i, c in enumerate(checks)],
        value.get("end_state"),
    )


def _check(value: Any, name: str) -> Check:
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("name"), str)
        or not isinstance(value.get("passed"), bool)
        or not value.keys() <= {"name", "passed", "detail"}
    ):
        raise _unusable(name, "{name: string, passed: true|false, detail: string}", value)
    return Check(value["name"], value["passed"], _str(value.get("detail"), f"{name}.detail"))


def _step(value: Any, name: str, stored: bool = False) -> Step:
    if not isinstance(value, dict):
        raise _unusable(name, "a step object", value)
    unknown = value.keys() - _STEP_KEYS
    if unknown:
        raise RowError(
            f"field {name!r}: unknown step key(s) {', '.join(sorted(map(str, unknown)))}; "
            f"expected some of {', '.join(sorted(_STEP_KEYS))}"
        )
    call = value.get("tool_call")
    tool_call = None if call is None else _tool_call(call, f"{name}.tool_call", stored)
    kind = value.get("kind")
    if kind is None:
        kind = "tool_call" if tool_call is not None else "other"
    elif kind not in _STEP_KINDS:
        raise RowError(
            f"field '{name}.kind': expected one of {', '.join(sorted(_STEP_KINDS))}, "
            f"got {describe(kind)}"
        )
    usage = value.get("usage")
    return Step(
        kind=cast(StepKind, kind),
        name=_str(value.get("name"), f"{name}.name"),
        input=value.get("input"),
        output=value.get("output"),
        tool_call=tool_call,
        usage=None if usage is None else _usage(usage, f"{name}.usage"),
        error=_str(value.get("error"), f"{name}.error"),
        start_time_unix_nano=_nanos(value, "start_time_unix_nano", name),
        end_time_unix_nano=_nanos(value, "end_time_unix_nano", name),
        span_id=_str(value.get("span_id"), f"{name}.span_id"),
    )


def _tool_call(value: Any, name: str, stored: bool = False) -> ToolCall:
    if not isinstance(value, dict):
        raise _unusable(name, "an object with a name", value)
    fn = value.get("function", value)  # OpenAI nests name and arguments under "function"
    if not isinstance(fn, dict):
        raise _unusable(f"{name}.function", "an object", fn)
    call_name = fn.get("name")
    # A stored trajectory keeps what an agent sent, a call naming no tool included.
    if type(call_name) is not str or not (call_name or stored):
        raise _unusable(f"{name}.name", "a non-empty string", call_name)
    args = fn.get("arguments")
    if isinstance(args, str):
        # a malformed argument string is itself evidence about the agent: keep it as it is
        with contextlib.suppress(orjson.JSONDecodeError):
            args = orjson.loads(args)
    return ToolCall(name=call_name, arguments=args, id=_str(value.get("id"), f"{name}.id"))


def _str(value: Any, name: str) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        raise _unusable(name, "a string", value)
    return value


def _nanos(step: dict[str, Any], key: str, name: str) -> int:
    value = step.get(key)
    if value is None:
        return 0
    if type(value) is str and value.isascii() and value.isdigit():
        # proto3 JSON's int64 form: a time in ns exceeds what a JSON number holds exactly
        # (2**53), so a row that crosses the wire as a Struct carries it as a string.
        return int(value)
    if type(value) is not int or value < 0:
        raise _unusable(f"{name}.{key}", _COUNT, value)
    return value


_TYPE_NAMES: Final[dict[type, str]] = {
    type(None): "null",
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}


def describe(value: Any) -> str:
    """A short description of a bad value for an error message."""
    kind = _TYPE_NAMES.get(type(value))
    if kind is None:
        return type(value).__name__
    if value is None:
        return "null"
    text = repr(value) if not isinstance(value, dict | list) else _compact(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}" if kind in ("an object", "a list") else text


def _compact(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return repr(value)


def record_to_row(record: Record) -> dict[str, Any]:
    """The JSON row that ``record_from_dict`` with the default ``FieldMap`` reads back as an
    equal record (provenance aside): how records from traces become dataset rows (promotion).

    Example:
        >>> r = Record(id="t1", input=Content.of_text("hi"), metadata={"lang": "en"})
        >>> record_to_row(r)
        {'id': 't1', 'input': 'hi', 'metadata': {'lang': 'en'}}
    """
    row: dict[str, Any] = {"id": record.id}
    for key in ("input", "output", "reference"):
        content = getattr(record, key)
        if content is not None:
            row[key] = content.to_value()
    if record.context:
        row["context"] = [c.to_value() for c in record.context]
    if record.trajectory is not None:
        traj = record.trajectory.to_value()
        row["trajectory"] = traj["steps"] if record.trajectory.plain() else traj
    if record.usage is not None:
        row["usage"] = record.usage.known()
    if record.metadata:
        row["metadata"] = record.metadata
    return row

"""JSON outputs: ``json-valid`` (the output is JSON) and ``json-schema`` (it fits a schema)."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.core import Content, JsonValue, ParamError, Record, Score
from evalsi.packs._declare import builtin, clip, passed

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_SHOWN_ERRORS = 3


def fenced_body(text: str) -> str | None:
    """The body of ``text`` when it is one fenced block and nothing else but whitespace
    (```json\\n...\\n```, the tag optional, any case), else None.

    Written out instead of a regular expression: the output is anyone's text, and the
    pattern this replaces backtracked in time growing with the fourth power of its length
    (450 spaces after a fence held the server's grading for half a minute).
    """
    s = text.strip()
    if len(s) < 6 or not s.startswith("```") or not s.endswith("```"):
        return None
    head = s[3:-3].lstrip(" \t")
    if head[:4].lower() == "json":
        head = head[4:].lstrip(" \t")
    for newline in ("\r\n", "\r", "\n"):
        if head.startswith(newline):
            head = head[len(newline) :]
            break
    return head.rstrip()


def parse_output(output: Content, *, allow_fenced: bool) -> tuple[JsonValue, str | None]:
    """The output's JSON value and None, or None and why it is not JSON.

    JSON content is taken as is; anything else is parsed from ``output.as_text()``.
    """
    if output.kind == "json":
        return output.value, None
    text = output.as_text()
    where = ""
    if allow_fenced:
        fenced = fenced_body(text)
        if fenced is not None:
            text, where = fenced, " inside the fenced block"
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as e:
        return None, (
            f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno} (char {e.pos}){where}"
        )


class JsonValid:
    """Pass when the output is valid JSON.

    JSON content passes; any other output passes when ``output.as_text()`` parses as one JSON
    document (any value, surrounding whitespace allowed). A failure explains the parse error
    and its position.

    Args:
        allow_fenced: also accept text that is exactly one Markdown code fence (```` ```json ````
            or ```` ``` ````) around the JSON, with only whitespace outside it.
    """

    __slots__ = ("_allow_fenced",)

    def __init__(self, *, allow_fenced: bool = False) -> None:
        self._allow_fenced = allow_fenced

    def __call__(self, record: Record) -> bool | Score:
        out = record.output
        assert out is not None
        _, error = parse_output(out, allow_fenced=self._allow_fenced)
        if error is None:
            return True
        return Score(passed=False, explanation=error)


json_valid = builtin(
    "core",
    "json-valid",
    passed("json-valid", "the output is valid JSON"),
    example="evalsi eval --data extract.jsonl --evaluators json-valid "
    "--param json-valid.allow_fenced=true",
)(JsonValid)


class JsonSchema:
    """Pass when the output is JSON that validates against a JSON Schema (Draft 2020-12).

    The output is JSON content, or text parsed as JSON (text that does not parse fails with the
    parse error). The schema is checked when the evaluator is bound, so an invalid schema is a
    param error. Formats are annotations, as the draft says (``format`` is not asserted), and
    ``$ref`` resolves only inside the schema: nothing is fetched, and a ``$ref`` that does not
    resolve makes each record an ERROR. A failure lists the first errors with their JSON paths.

    Args:
        schema: the JSON Schema (required), always read as Draft 2020-12.
        allow_fenced: also accept text that is one Markdown code fence around the JSON.
    """

    __slots__ = ("_allow_fenced", "_validator")

    def __init__(self, *, schema: dict[str, Any], allow_fenced: bool = False) -> None:
        # jsonschema is imported on bind: it would cost `import evalsi` ~50 ms.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            raise ParamError(
                "json-schema: param 'schema' is not a valid Draft 2020-12 schema: "
                f"{e.message} (at {e.json_path})"
            ) from e
        # An empty registry: a $ref is resolved inside the schema or fails; nothing is fetched.
        from referencing import Registry

        self._validator: Validator = Draft202012Validator(schema, registry=Registry())
        self._allow_fenced = allow_fenced

    def __call__(self, record: Record) -> bool | Score:
        out = record.output
        assert out is not None
        value, error = parse_output(out, allow_fenced=self._allow_fenced)
        if error is not None:
            return Score(passed=False, explanation=error)
        errors = list(islice(self._validator.iter_errors(value), _SHOWN_ERRORS + 1))
        if not errors:
            return True
        shown = "; ".join(f"{e.json_path}: {clip(e.message)}" for e in errors[:_SHOWN_ERRORS])
        more = "; ..." if len(errors) > _SHOWN_ERRORS else ""
        return Score(passed=False, explanation=f"does not match the schema: {shown}{more}")


json_schema = builtin(
    "core",
    "json-schema",
    passed("json-schema", "the output is JSON valid under the schema"),
    example="evalsi eval --data extract.jsonl --evaluators json-schema --param "
    """'json-schema.schema={"type":"object","required":["name"]}'""",
)(JsonSchema)

"""json-valid and json-schema."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Content, Outcome, ParamError, Record, Score
from evalsi.evaluators import RecordRunner, make_runner
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}


def score(name: str, output: Any, **params: Any) -> Score:
    runner = make_runner(REG.resolve(name).bind(params))
    assert isinstance(runner, RecordRunner)
    (result,) = runner.run([Record(id="r", output=Content.from_value(output))])
    assert result.outcome is Outcome.SCORED, result.reason
    (only,) = result.scores
    assert only.name == name
    return only


# -- json-valid ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"a": 1}', " [1, 2] \n", "42", '"text"', "null", '{"é": "ü"}'])
def test_json_valid_text(text: str) -> None:
    assert score("json-valid", text).passed is True


def test_json_valid_json_content_passes() -> None:
    assert score("json-valid", {"a": [1, 2]}).passed is True


def test_json_valid_explains_the_parse_error_position() -> None:
    got = score("json-valid", '{"a": 1,\n "b": }')
    assert got.passed is False
    assert got.explanation.startswith("not valid JSON: ")
    assert "line 2, column 7 (char 15)" in got.explanation


@pytest.mark.parametrize("text", ["", "yes", "{'a': 1}", '{"a": 1} trailing', "NaN"])
def test_json_valid_rejects(text: str) -> None:
    assert score("json-valid", text).passed is False


FENCED = '```json\n{"a": 1}\n```\n'


def test_json_valid_fences_are_refused_by_default() -> None:
    assert score("json-valid", FENCED).passed is False


@pytest.mark.parametrize(
    "text", [FENCED, "  ```\n[1]\n```", '```JSON\r\n{"a": 1}\r\n```', '```json {"a": 1} ```']
)
def test_json_valid_allow_fenced(text: str) -> None:
    assert score("json-valid", text, allow_fenced=True).passed is True


def test_json_valid_allow_fenced_still_needs_json_and_no_prose() -> None:
    got = score("json-valid", "```json\n{oops}\n```", allow_fenced=True)
    assert got.passed is False
    assert got.explanation.endswith("inside the fenced block")
    assert score("json-valid", 'Here:\n```json\n{"a": 1}\n```', allow_fenced=True).passed is False
    assert score("json-valid", '```python\n{"a": 1}\n```', allow_fenced=True).passed is False
    assert score("json-valid", '{"a": 1}', allow_fenced="true").passed is True


# -- json-schema --------------------------------------------------------------------------------


def test_json_schema_valid_output() -> None:
    assert score("json-schema", '{"name": "Ada", "age": 36}', schema=PERSON).passed is True
    assert score("json-schema", {"name": "Ada", "tags": ["x"]}, schema=PERSON).passed is True


def test_json_schema_lists_errors_with_paths() -> None:
    got = score("json-schema", {"age": -1, "tags": ["a", 2]}, schema=PERSON)
    assert got.passed is False
    assert got.explanation.startswith("does not match the schema: ")
    assert "$.age: -1 is less than the minimum of 0" in got.explanation
    assert "$.tags[1]: 2 is not of type 'string'" in got.explanation
    assert "$: 'name' is a required property" in got.explanation
    assert not got.explanation.endswith("...")


def test_json_schema_shows_the_first_three_errors() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    got = score("json-schema", [1, 2, 3, 4, 5], schema=schema)
    assert got.explanation.count("is not of type") == 3
    assert got.explanation.endswith("; ...")


def test_json_schema_unparsable_text_fails_with_the_parse_error() -> None:
    got = score("json-schema", "{name: Ada}", schema=PERSON)
    assert got.passed is False
    assert got.explanation.startswith("not valid JSON: ")


def test_json_schema_allow_fenced() -> None:
    text = '```json\n{"name": "Ada"}\n```'
    assert score("json-schema", text, schema=PERSON).passed is False
    assert score("json-schema", text, schema=PERSON, allow_fenced=True).passed is True


def test_json_schema_is_draft_2020_12() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}
    assert score("json-schema", "[1]", schema=schema).passed is True
    assert score("json-schema", "[1, 2]", schema=schema).passed is False


def test_json_schema_local_refs_resolve() -> None:
    schema = {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "$ref": "#/$defs/pos"}
    assert score("json-schema", "3", schema=schema).passed is True
    assert score("json-schema", "0", schema=schema).passed is False


@pytest.mark.parametrize(
    "schema", [{"$ref": "https://example.com/s.json"}, {"$ref": "#/$defs/missing"}]
)
def test_json_schema_unresolvable_refs_are_errors_and_nothing_is_fetched(
    schema: dict[str, Any],
) -> None:
    runner = make_runner(REG.resolve("json-schema").bind({"schema": schema}))
    assert isinstance(runner, RecordRunner)
    (result,) = runner.run([Record(id="r", output=Content.of_text("{}"))])
    assert result.outcome is Outcome.ERROR
    assert "Unresolvable" in result.reason or "PointerToNowhere" in result.reason


def test_json_schema_from_a_cli_string() -> None:
    got = score("json-schema", '{"a": 1}', schema='{"type": "object", "required": ["b"]}')
    assert got.passed is False


def test_json_schema_invalid_schema_is_a_param_error() -> None:
    with pytest.raises(ParamError) as info:
        REG.resolve("json-schema").bind({"schema": {"type": "objekt"}})
    message = info.value.message
    assert message.startswith("json-schema: param 'schema' is not a valid Draft 2020-12 schema: ")
    assert "(at $.type)" in message


def test_json_schema_nested_invalid_schema_names_the_place() -> None:
    with pytest.raises(ParamError, match=r"at \$\.properties\.age\.minimum"):
        REG.resolve("json-schema").bind({"schema": {"properties": {"age": {"minimum": "zero"}}}})


@pytest.mark.parametrize("bad", [[1], "not json", 3])
def test_json_schema_schema_must_be_an_object(bad: Any) -> None:
    with pytest.raises(ParamError, match="json-schema: param 'schema' must be a"):
        REG.resolve("json-schema").bind({"schema": bad})


def test_json_schema_requires_a_schema() -> None:
    with pytest.raises(ParamError, match="json-schema: missing required param"):
        REG.resolve("json-schema").bind({})


def test_json_schema_never_fetches_a_remote_ref() -> None:
    """A $ref to an http URL must not be downloaded (a loopback server counts the requests)."""
    import http.server
    import threading

    from evalsi.core import Outcome
    from evalsi.evaluators import make_runner

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/s.json"
        bound = REG.resolve("json-schema").bind({"schema": {"$ref": url}})
        (result,) = make_runner(bound).run([Record(id="1", output=Content.of_text('"x"'))])
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []
    assert result.outcome is Outcome.ERROR

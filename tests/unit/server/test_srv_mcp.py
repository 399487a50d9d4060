"""The MCP tools in process: one schema with the OpenAPI document (a drift fails here), the
schemas accept what the handlers parse and refuse unknown fields, and any arguments at all
come back as a result or a tool error, never an exception."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from evalsi.server._app import default_services
from evalsi.server._mcp import REPORT_URI, TOOLS, McpTools, tool_schemas
from evalsi.server.protocol import build_openapi, message_schema
from tests.support.server_state import server_state

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


def _local(node: Any) -> Any:
    """OpenAPI's component references as JSON Schema's local ones."""
    text = repr(node)
    return eval(text.replace("#/components/schemas/", "#/$defs/"))


def test_each_tool_schema_is_the_openapi_schema_of_its_request() -> None:
    schemas = tool_schemas()  # imports the services' descriptors
    services = sorted({t.service for t in TOOLS})
    document = build_openapi(services)
    components = document["components"]["schemas"]
    parameters = {
        op["operationId"]: {p["name"] for p in op.get("parameters", [])}
        for path in document["paths"].values()
        for op in path.values()
    }
    for name, schema in schemas.items():
        tool = next(t for t in TOOLS if t.name == name)
        message = tool.method.input_type.full_name
        body = {k: v for k, v in schema.items() if k not in ("$schema", "$defs")}
        if message in components:  # a request body
            assert body == _local(components[message]), name
        else:  # a GET: the same fields as path and query parameters
            operation = f"{tool.service.split('.')[-1]}_{tool.method.name}"
            assert set(body["properties"]) == parameters[operation], name
        for ref, sub in schema["$defs"].items():
            if ref in components:
                assert sub == _local(components[ref]), f"{name}: {ref}"


def test_schemas_accept_valid_requests_and_refuse_unknown_fields() -> None:
    schemas = tool_schemas()
    good = {
        "evaluate": {
            "records": [{"id": "1", "output": {"text": "a"}, "reference": {"text": "a"}}],
            "evaluators": [{"ref": "exact-match"}],
        },
        "get_run": {"id": "latest"},
        "compare_runs": {"baseline": "a", "candidate": "b", "level": 0.9},
        "list_evaluators": {},
    }
    for name, doc in good.items():
        jsonschema.validate(doc, schemas[name])
        bad = {**copy.deepcopy(doc), "nope": 1}
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schemas[name])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"baseline": "a", "candidate": "b", "level": 1.5}, schemas["compare_runs"]
        )


def test_a_message_schema_is_self_contained() -> None:
    from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb

    schema = message_schema(pb.CreateRunRequest.DESCRIPTOR)
    assert schema["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(schema)
    refs = set(_refs(schema))
    assert refs
    assert all(r.startswith("#/$defs/") and r[8:] in schema["$defs"] for r in refs)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> McpTools:
    state = server_state(tmp_path_factory.mktemp("mcp"), runs=False)
    services = default_services(state)
    handlers = {factory(h).path.strip("/"): h for factory, h in services}

    async def report(run_id: str) -> str:
        return run_id

    return McpTools(handlers, report)


class _Params:
    def __init__(self, name: str = "", arguments: Any = None, uri: str = "") -> None:
        self.name = name
        self.arguments = arguments
        self.uri = uri


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from([t.name for t in TOOLS if t.name != "start_run"] + ["nope"]),
    arguments=st.dictionaries(st.text(max_size=12), JSON, max_size=4),
)
def test_any_arguments_give_a_result_or_a_tool_error(
    tools: McpTools, name: str, arguments: dict[str, Any]
) -> None:
    result = asyncio.run(tools._call_tool(None, _Params(name, arguments)))  # type: ignore[arg-type]
    if result.is_error:
        text = result.content[0].text
        assert text
        assert "Traceback" not in text
        assert name == "nope" or text.split(":")[0] in {
            "invalid_argument", "not_found", "failed_precondition", "resource_exhausted"
        }  # fmt: skip
    else:
        assert isinstance(result.structured_content, dict)


def test_only_report_resources_are_read(tools: McpTools) -> None:
    assert REPORT_URI == "evalsi://runs/{id}/report.md"
    for uri in (
        "evalsi://runs/../../etc/passwd",
        "file:///etc/passwd",
        "evalsi://runs//report.md",
        "evalsi://runs/a/b/report.md",
        "evalsi://runs/ a/report.md",
    ):
        with pytest.raises(MCPError, match="no resource") as caught:
            asyncio.run(tools._read_resource(None, _Params(uri=uri)))  # type: ignore[arg-type]
        assert caught.value.error.code == -32602

"""The OpenAPI document and the REST route table, both read from the descriptors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2
from openapi_spec_validator import validate

import evalsi._proto.evalsi.v1alpha1.catalog_service_pb2
import evalsi._proto.evalsi.v1alpha1.dataset_service_pb2
import evalsi._proto.evalsi.v1alpha1.evaluation_service_pb2
import evalsi._proto.evalsi.v1alpha1.run_service_pb2  # noqa: F401 - registers the services
from evalsi.server.protocol._openapi import build_openapi, merge_keywords, split_constraints
from evalsi.server.protocol._rest import compile_template, handler_attr, http_rules

ROOT = Path(__file__).resolve().parents[4]
SERVICES = [
    "evalsi.v1alpha1.EvaluationService",
    "evalsi.v1alpha1.RunService",
    "evalsi.v1alpha1.CatalogService",
    "evalsi.v1alpha1.DatasetService",
]


def test_document_validates_and_covers_every_annotated_rpc() -> None:
    doc = build_openapi(SERVICES)
    validate(doc)
    ops = [op for path in doc["paths"].values() for op in path.values()]
    assert len(ops) == len(http_rules(SERVICES))
    assert len({op["operationId"] for op in ops}) == len(ops)
    for path, item in doc["paths"].items():
        for op in item.values():
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert declared == {seg.strip("{}") for seg in _vars(path)}, path


def _vars(path: str) -> list[str]:
    out, i = [], path.find("{")
    while i != -1:
        j = path.index("}", i)
        out.append(path[i : j + 1])
        i = path.find("{", j)
    return out


def test_proto3_json_mapping() -> None:
    schemas = build_openapi(SERVICES)["components"]["schemas"]
    run = schemas["evalsi.v1alpha1.Run"]["properties"]
    assert run["records"]["type"] == "string"
    assert run["records"]["format"] == "int64"
    assert run["exitCode"]["description"].startswith("What `evalsi run` would exit with")
    assert {k: v for k, v in run["exitCode"].items() if k != "description"} == {
        "type": "integer",
        "format": "int32",
        "minimum": -(2**31),
        "maximum": 2**31 - 1,
    }
    assert run["createTime"]["format"] == "date-time"
    assert run["spec"]["type"] == "object"
    assert run["spec"]["additionalProperties"] is True
    assert run["metrics"]["type"] == "array"
    assert "datasetVersion" in run
    assert "dataset_version" not in run
    summary = schemas["evalsi.v1alpha1.MetricSummary"]["properties"]
    assert summary["labels"]["additionalProperties"]["format"] == "int64"
    assert {"type": "number"} in summary["mean"]["oneOf"]
    result = schemas["evalsi.v1alpha1.EvaluationResult"]["properties"]
    assert result["duration"]["type"] == "string"


def test_get_fields_become_query_parameters() -> None:
    doc = build_openapi(SERVICES)
    params = {p["name"]: p for p in doc["paths"]["/v1alpha1/runs"]["get"]["parameters"]}
    assert set(params) == {"pageSize", "pageToken", "kind", "status", "projectId"}
    assert all(p["in"] == "query" and not p["required"] for p in params.values())
    watch = doc["paths"]["/v1alpha1/runs/{id}:watch"]["get"]["responses"]["200"]
    assert "application/x-ndjson" in watch["content"]


def _descriptor_set(tmp_path: Path) -> Any:
    pytest.importorskip("grpc_tools")
    import google.api.annotations_pb2 as annotations

    googleapis = Path(annotations.__file__).resolve().parents[2]
    out = tmp_path / "set.binpb"
    protos = sorted(
        p.relative_to(ROOT / "proto").as_posix() for p in (ROOT / "proto").rglob("*.proto")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT / 'proto'}",
            f"-I{googleapis}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            "--include_source_info",
            *protos,
        ],
        check=True,
        cwd=ROOT / "proto",
    )
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(out.read_bytes())
    return fds


def test_proto_comments_become_descriptions(tmp_path: Path) -> None:
    doc = build_openapi(SERVICES, source_info=_descriptor_set(tmp_path))
    validate(doc)
    create = doc["paths"]["/v1alpha1/runs"]["post"]
    assert create["description"].startswith("Validates the spec and starts the run")
    run = doc["components"]["schemas"]["evalsi.v1alpha1.Run"]
    assert run["description"] == "A run as the store holds it."
    assert run["properties"]["records"]["description"] == "Samples (records) processed so far."
    # A $ref field keeps its description beside the reference.
    progress = run["properties"]["progress"]
    assert "description" not in progress or progress["allOf"][0]["$ref"].endswith("RunProgress")


@pytest.mark.parametrize(
    ("template", "path", "params"),
    [
        ("/v1alpha1/runs/{id}", "/v1alpha1/runs/abc", {"v0": "abc"}),
        ("/v1alpha1/runs/{id}", "/v1alpha1/runs/abc/results", None),
        ("/v1alpha1/runs/{id}:cancel", "/v1alpha1/runs/a:b:cancel", {"v0": "a:b"}),
        ("/v1alpha1/runs/{id}:cancel", "/v1alpha1/runs/abc", None),
        ("/v1alpha1/runs:compare", "/v1alpha1/runs:compare", {}),
        ("/v1/{name=projects/*/runs/*}", "/v1/projects/p/runs/r", {"v0": "projects/p/runs/r"}),
        ("/v1/{path=**}", "/v1/a/b/c", {"v0": "a/b/c"}),
    ],
)
def test_templates(template: str, path: str, params: dict[str, str] | None) -> None:
    regex, _, _ = compile_template(template)
    found = regex.match(path)
    assert (found.groupdict() if found else None) == params


def test_openapi_path_form() -> None:
    assert compile_template("/v1/{name=projects/*}:run")[1] == "/v1/{name}:run"


def test_custom_verbs_are_tried_first() -> None:
    order = [m.template for m in http_rules(["evalsi.v1alpha1.RunService"])]
    assert order.index("/v1alpha1/runs/{id}:watch") < order.index("/v1alpha1/runs/{id}")


def test_handler_attr_matches_generated_names() -> None:
    assert handler_attr("ListRunResults") == "list_run_results"
    assert handler_attr("GetRun") == "get_run"


# -- constraints (@constraints lines in proto comments) -----------------------------------------
ALL_SERVICES = [
    *SERVICES,
    "evalsi.v1alpha1.TraceService",
    "evalsi.v1alpha1.PolicyService",
]


def _params(doc: dict[str, Any], path: str, verb: str = "get") -> dict[str, Any]:
    return {p["name"]: p["schema"] for p in doc["paths"][path][verb].get("parameters", [])}


def test_document_states_the_servers_constraints() -> None:
    import evalsi._proto.evalsi.v1alpha1.policy_service_pb2
    import evalsi._proto.evalsi.v1alpha1.trace_service_pb2  # noqa: F401

    doc = build_openapi(ALL_SERVICES)
    validate(doc)
    runs = _params(doc, "/v1alpha1/runs")
    assert (runs["pageSize"]["minimum"], runs["pageSize"]["maximum"]) == (0, 1000)
    assert "" in runs["status"]["enum"]
    assert "cancelled" in runs["status"]["enum"]
    assert _params(doc, "/v1alpha1/runs/{id}/results")["pageSize"]["maximum"] == 10_000
    assert _params(doc, "/v1alpha1/datasets/{name}")["pageSize"]["maximum"] == 10_000
    assert _params(doc, "/v1alpha1/spans")["type"]["enum"][1:] == [
        "llm", "tool", "agent", "retriever", "embedding", "chain", "guardrail", "generic",
    ]  # fmt: skip
    trace = _params(doc, "/v1alpha1/traces/{trace_id}")
    assert re.fullmatch(trace["trace_id"]["pattern"], "0af7651916cd43dd8448eb211c80319c")
    assert not re.search(trace["trace_id"]["pattern"], "0af7651916cd43dd8448eb211c80319")
    project = trace["projectId"]["pattern"]
    assert re.search(project, "")
    assert re.search(project, "team-a.b_c")
    assert not re.search(project, "-x")
    assert not re.search(project, "a" * 65)
    since = _params(doc, "/v1alpha1/traces")["since"]
    assert re.search(since["pattern"], "1970-01-01T00:00:00Z")
    assert not re.search(since["pattern"], "1969-12-31T23:59:59Z")
    assert not re.search(since["pattern"], "2262-04-12T00:00:00Z")  # past int64 nanoseconds

    schemas = doc["components"]["schemas"]
    compare = schemas["evalsi.v1alpha1.CompareRunsRequest"]
    assert compare["required"] == ["baseline", "candidate"]
    assert compare["properties"]["level"]["type"] == "number"  # no "NaN": outside the range
    assert compare["properties"]["level"]["exclusiveMaximum"] == 1
    policy = schemas["evalsi.v1alpha1.ApplyPolicyRequest"]
    assert policy["oneOf"] == [{"required": ["policy"]}, {"required": ["yaml"]}]
    assert doc["paths"]["/v1alpha1/policies"]["post"]["requestBody"]["required"] is True
    assert doc["paths"]["/v1alpha1/runs/{id}:cancel"]["post"]["requestBody"]["required"] is False
    evaluate = schemas["evalsi.v1alpha1.EvaluateRequest"]["properties"]
    assert evaluate["records"]["minItems"] == 1
    # The spec messages carry the constraints their JSON Schemas have (one source for both).
    eval_run = schemas["evalsi.v1alpha1.EvalRun"]
    assert eval_run["required"] == ["apiVersion", "kind", "metadata", "spec"]
    assert eval_run["properties"]["kind"]["const"] == "EvalRun"
    # A oneof allows one member: the JSON parser refuses two.
    content = schemas["evalsi.v1alpha1.Content"]
    assert {"required": ["text", "json"]} in content["allOf"][0]["not"]["anyOf"]
    # The annotation is not part of any description.
    assert "@constraints" not in json.dumps(doc)


@pytest.mark.parametrize(
    ("message", "field", "bound", "negative"),
    [
        ("CompareRunsRequest", "seed", 2**64 - 1, False),  # uint64
        ("Run", "records", 2**63 - 1, True),  # int64
    ],
)
def test_64_bit_patterns_are_exact(message: str, field: str, bound: int, negative: bool) -> None:
    schemas = build_openapi(SERVICES)["components"]["schemas"]
    pattern = schemas[f"evalsi.v1alpha1.{message}"]["properties"][field]["pattern"]
    inside = [0, 7, 10, 99, bound // 3, bound - 1, bound, *(10**k for k in range(len(str(bound))))]
    for n in inside:
        assert re.search(pattern, str(n)), n
    for n in (bound + 1, bound * 2, 10 ** len(str(bound))):
        assert not re.search(pattern, str(n)), n
    assert re.search(pattern, str(-bound)) if negative else not re.search(pattern, "-1")
    assert not re.search(pattern, "01")
    assert not re.search(pattern, "")
    # The reference: protobuf's own JSON parser takes exactly these strings.
    from google.protobuf import json_format

    import evalsi._proto.evalsi.v1alpha1.run_service_pb2 as run_service

    json_format.ParseDict({"seed": str(2**64 - 1)}, run_service.CompareRunsRequest())
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict({"seed": str(2**64)}, run_service.CompareRunsRequest())


def test_constraint_lines_are_read_and_checked() -> None:
    text, keywords = split_constraints(
        ' Empty means "default".\n @constraints {"pattern": "^a$"}\n'
        ' @constraints {"maxLength": 3}\n',
        "x.Y.z",
    )
    assert text == 'Empty means "default".'
    assert keywords == {"pattern": "^a$", "maxLength": 3}
    with pytest.raises(ValueError, match=r"x\.Y\.z: @constraints is not valid JSON"):
        split_constraints(" @constraints {pattern: 1}", "x.Y.z")
    with pytest.raises(ValueError, match="must be a JSON object"):
        split_constraints(" @constraints [1]", "x.Y.z")
    base = {"type": "array", "items": {"type": "string"}}
    merge_keywords(base, {"items": {"minLength": 1}, "maxItems": 2})
    assert base == {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2}

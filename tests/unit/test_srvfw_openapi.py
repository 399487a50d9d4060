"""The OpenAPI document and the REST route table, both read from the descriptors."""

from __future__ import annotations

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
from evalsi.server._openapi import build_openapi
from evalsi.server._rest import compile_template, handler_attr, http_rules

ROOT = Path(__file__).resolve().parents[2]
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

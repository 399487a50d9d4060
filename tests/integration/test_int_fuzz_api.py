"""Fuzz every operation of the generated ``/openapi.json`` against the real app (schemathesis):
whatever a client sends — valid per the schema or not — the answer is never a 5xx, and a
request the document calls valid is not refused as malformed (schemathesis'
``positive_data_acceptance``: no 400/422), so the document tells clients the truth.
Derandomized (the same cases every run) and bounded (a few examples per operation and mode)
to fit CI."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.failures import FailureGroup

from evalsi.packs import builtin_registry
from evalsi.server._app import build_app
from evalsi.server._run_manager import RunManager
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer

EXAMPLES = 10

# Refusals of schema-valid requests that no JSON Schema can state, each with why. Everything
# else the server checks is in the document (patterns, ranges, enums, required fields, oneofs:
# `@constraints` lines in proto/), and a refusal outside this list fails the test.
BEYOND_A_SCHEMA: list[tuple[str, re.Pattern[str], str]] = [
    # A relation between two fields: JSON Schema compares a value with constants only.
    ("*", re.compile(r"until: must be after since"), "cross-field"),
    # Which evaluators exist is the server's catalog (GET /v1alpha1/evaluators), not the
    # request's shape: a well-formed ref to an evaluator it lacks is refused.
    ("*", re.compile(r"unknown evaluator"), "the server's catalog"),
    # Which datasets exist is what the server holds (the DatasetService lists them).
    ("POST /v1alpha1/runs", re.compile(r"no dataset .* in the project's datasets"), "contents"),
    # A prefix matching two stored runs: depends on what the store holds.
    ("*", re.compile(r"run id prefix .* is ambiguous"), "the store's contents"),
    # Which target kinds a server runs is its configuration (Python targets never).
    ("POST /v1alpha1/runs", re.compile(r"targets are refused by this server"), "configuration"),
    # Which secrets a server lends is its configuration (secrets.allowEnv; file: never), and so
    # is whether it signs Bedrock calls with its own AWS credentials.
    ("POST /v1alpha1/runs", re.compile(r"secret references are refused by a server"), "config"),
    ("POST /v1alpha1/runs", re.compile(r"is not a secret this server lends"), "configuration"),
    ("POST /v1alpha1/runs", re.compile(r"would sign with this server's AWS"), "configuration"),
    # The policy is a document in its own languages (YAML text, CEL conditions, durations),
    # checked by the loader `evalsi policy apply` shares; the document gives its shape only.
    ("POST /v1alpha1/policies", re.compile(r"^policy\b"), "YAML/CEL content"),
    # A review file is a JSONL document checked line by line as `evalsi review import` checks
    # it; the document gives the field's encoding only.
    ("POST /v1alpha1/reviews:import", re.compile(r"^file\b"), "review file content"),
]


def _beyond_a_schema(label: str, message: str) -> bool:
    return any(op in ("*", label) and pattern.search(message) for op, pattern, _ in BEYOND_A_SCHEMA)


@pytest.fixture(scope="module")
def api_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    store = str(root / "fuzz.db")
    config = ServerConfig(data_dir=root, datasets_dir=root / "datasets", store=store)
    state = ServerState(config=config, store=SqlStore.open(store), registry=builtin_registry())
    state.runs = RunManager(state)
    with AsgiServer(build_app(state)) as server:
        yield server.url
    state.store.close()


def _operations(url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_operation_answers_5xx(api_url: str, mode: GenerationMode) -> None:
    """Never a 5xx; and in positive mode (requests valid per the document) never a refusal
    of the request's form, checked by schemathesis' own ``positive_data_acceptance``."""
    operations = _operations(api_url)
    assert len(operations) >= 15  # every service's REST routes are in the document
    failures: list[str] = []
    rejected: list[str] = []
    accepted = 0
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            nonlocal accepted
            if mode is GenerationMode.POSITIVE and case.query:
                # Page tokens are opaque: only the server can mint a valid one (the document
                # says so), so the positive run asks for first pages; every other parameter
                # of the request is still generated and checked.
                case.query.pop("pageToken", None)
            response = case.call(base_url=api_url, timeout=30)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} {case.body!r:.200} -> "
                    f"{response.status_code}: {response.text[:300]}"
                )
            if mode is not GenerationMode.POSITIVE:
                return
            try:
                case.validate_response(response, checks=[positive_data_acceptance])
            except FailureGroup:
                message = response.json().get("message", "")
                if not _beyond_a_schema(case.operation.label, message):
                    rejected.append(
                        f"{case.operation.label} q={case.query} body={case.body!r:.200} -> "
                        f"{response.status_code}: {message[:300]}"
                    )
            else:
                accepted += response.status_code < 300

        try:
            check()
        except Unsatisfiable:
            # An operation without inputs (ListPacks) has no invalid request to generate.
            assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures[:20])
    assert not rejected, "schema-valid requests refused:\n" + "\n".join(rejected[:20])
    if mode is GenerationMode.POSITIVE:
        assert accepted > len(operations)  # the check saw real successes, not only skips


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_page_sizes_are_the_documents(api_url: str) -> None:
    """Every page_size the document bounds: its maximum is served, one more is refused (400)."""
    _, doc = _get(api_url + "/openapi.json")
    checked = []
    for path, item in doc["paths"].items():
        params = {p["name"]: p["schema"] for p in item.get("get", {}).get("parameters", [])}
        if "pageSize" not in params:
            continue
        most = params["pageSize"]["maximum"]
        url = api_url + path.replace("{id}", "no-such-run").replace("{name}", "no-such-set")
        status, body = _get(f"{url}?pageSize={most}")
        assert status in (200, 404), (path, body)  # 404: no such run or dataset
        status, body = _get(f"{url}?pageSize={most + 1}")
        assert status == 400, (path, body)
        assert body["message"].startswith("page_size: "), body
        assert str(most) in body["message"]
        checked.append(path)
    assert len(checked) >= 6, checked  # runs, results, traces, sessions, spans, dataset rows

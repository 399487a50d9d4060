"""RunHandler's request validation without a network: every bad field is a ``UserError`` whose
message starts with the field's name and says what was expected, before any run is created or
the store is asked for a page."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.core import NotFoundError, UserError
from evalsi.server._runs import MAX_PAGE, MAX_RESULTS_PAGE, MAX_TASKS_PAGE, RunHandler
from evalsi.server._state import Limits
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import server_state

STUB = "http://127.0.0.1:9/v1"  # never called: nothing here creates a run


@pytest.fixture
def handler(tmp_path: Path) -> Iterator[RunHandler]:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "qa.jsonl").write_text('{"id": "1", "input": "q", "reference": "a"}\n')
    limits = Limits(max_trials=2, max_concurrency=8)
    state = server_state(tmp_path, limits=limits)  # a file: pages are read on threads
    yield RunHandler(state)
    state.store.close()


def _refused(call: Any) -> UserError:
    with pytest.raises(UserError) as caught:
        asyncio.run(call)
    return caught.value


def test_create_run_without_a_document_names_run(handler: RunHandler) -> None:
    error = _refused(handler.create_run(pb.CreateRunRequest(), None))
    assert error.message == "run: the EvalRun document is required"


@pytest.mark.parametrize(
    ("run_id", "message"),
    [
        ("", "id: a run id is required (an id, a unique prefix, or latest)"),
        ("  ", "id: a run id is required (an id, a unique prefix, or latest)"),
        ("ab\x00c", "id: contains a NUL character"),
    ],
)
def test_a_missing_or_unstorable_run_id_is_named(
    handler: RunHandler, run_id: str, message: str
) -> None:
    assert _refused(handler.get_run(pb.GetRunRequest(id=run_id), None)).message == message
    assert _refused(handler.cancel_run(pb.CancelRunRequest(id=run_id), None)).message == message


def test_a_bad_project_id_is_named(handler: RunHandler) -> None:
    error = _refused(handler.get_run(pb.GetRunRequest(id="latest", project_id="no spaces"), None))
    assert error.message.startswith("project_id: ")
    assert "expected 1-64 letters" in error.message


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            pb.ListRunsRequest(page_size=MAX_PAGE + 1),
            f"page_size: expected 0 (the default, 20) to {MAX_PAGE}, got {MAX_PAGE + 1}",
        ),
        (pb.ListRunsRequest(page_size=-1), "page_size: expected 0"),
        (pb.ListRunsRequest(status="finished"), "status: 'finished' is not one of "),
        (pb.ListRunsRequest(page_token="20990101-x"), "page_token: '20990101-x' is not a token"),
        (pb.ListRunsRequest(kind="sc\x00ore"), "kind: contains a NUL character"),
    ],
)
def test_list_runs_names_the_bad_field(
    handler: RunHandler, request_: pb.ListRunsRequest, message: str
) -> None:
    assert _refused(handler.list_runs(request_, None)).message.startswith(message)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "latest", "page_token": "-1"}, "page_token: '-1' is not a token this server gave"),
        ({"id": "latest", "page_token": "ten"}, "page_token: 'ten' is not a token this server"),
        ({"id": "latest", "page_size": MAX_RESULTS_PAGE + 1}, "page_size: expected 0"),
        ({"id": ""}, "id: a run id is required"),
    ],
)
def test_list_run_results_names_the_bad_field(
    handler: RunHandler, fields: dict[str, Any], message: str
) -> None:
    request = pb.ListRunResultsRequest(**fields)
    assert _refused(handler.list_run_results(request, None)).message.startswith(message)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "latest", "page_token": "-1"}, "page_token: '-1' is not a token this server gave"),
        (
            {"id": "latest", "page_size": MAX_TASKS_PAGE + 1},
            f"page_size: expected 0 (the default, 100) to {MAX_TASKS_PAGE}, got 1001",
        ),
        ({"id": "latest", "page_size": -1}, "page_size: expected 0"),
        ({"id": " "}, "id: a run id is required"),
        ({"id": "latest", "project_id": "no spaces"}, "project_id: "),
    ],
)
def test_list_run_tasks_names_the_bad_field(
    handler: RunHandler, fields: dict[str, Any], message: str
) -> None:
    request = pb.ListRunTasksRequest(**fields)
    assert _refused(handler.list_run_tasks(request, None)).message.startswith(message)


def test_list_run_tasks_of_no_such_run_is_not_found(handler: RunHandler) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        asyncio.run(handler.list_run_tasks(pb.ListRunTasksRequest(id="nope"), None))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"baseline": "a", "candidate": "b", "level": 1.5}, "level: expected a confidence level"),
        ({"baseline": "a", "candidate": "b", "level": -0.5}, "level: expected a confidence level"),
        ({"baseline": "", "candidate": "b"}, "baseline: a run id is required"),
    ],
)
def test_compare_runs_names_the_bad_field(
    handler: RunHandler, fields: dict[str, Any], message: str
) -> None:
    request = pb.CompareRunsRequest(**fields)
    assert _refused(handler.compare_runs(request, None)).message.startswith(message)


def _spec_error(handler: RunHandler, doc: dict[str, Any]) -> UserError:
    with pytest.raises(UserError) as caught:
        handler.spec_from_request(run_message(doc))
    return caught.value


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("hf://org/set", "spec.dataset.path: 'hf://org/set': a server reads datasets from its"),
        ("../outside.jsonl", "spec.dataset.path '../outside.jsonl' must be relative to the"),
        (
            "missing.jsonl",
            "spec.dataset.path: no dataset 'missing.jsonl' in the project's datasets",
        ),
    ],
)
def test_a_dataset_the_server_does_not_hold_is_refused(
    handler: RunHandler, path: str, message: str
) -> None:
    error = _spec_error(handler, run_doc(STUB, path))
    assert error.message.startswith(message)
    assert str(handler.state.config.datasets_dir) not in error.message  # never our own path


def test_limits_are_named_with_their_key(handler: RunHandler) -> None:
    trials = _spec_error(handler, run_doc(STUB, "qa.jsonl", trials=3))
    assert trials.message == (
        "spec.trials: 3 is over this server's limit of 2 (limits.maxTrials in its evalsi.yaml)"
    )
    concurrency = _spec_error(handler, run_doc(STUB, "qa.jsonl", concurrency=9))
    assert concurrency.message.startswith("spec.maxConcurrency: 9 is over this server's limit")
    assert "limits.maxConcurrency" in concurrency.message


def test_python_targets_are_refused_unless_allowed(handler: RunHandler) -> None:
    doc = run_doc(STUB, "qa.jsonl")
    doc["spec"]["target"] = {"python": "os:system"}
    error = _spec_error(handler, doc)
    assert error.message.startswith("spec.target.python: Python targets are refused")
    assert "allow_python_targets" in f"{error.message} {error.hint}"


def test_a_valid_document_becomes_its_spec(handler: RunHandler) -> None:
    spec = handler.spec_from_request(run_message(run_doc(STUB, "qa.jsonl", trials=2)))
    assert (spec.trials, spec.target.kind) == (2, "model")
    assert Path(spec.dataset.source).name == "qa.jsonl"

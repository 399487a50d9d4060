"""A code evaluator with no sandbox at or above its ``min_isolation`` stops every way in
before its first record or call (issue 16): ``evalsi.evaluate``, a Run and the server's
Evaluate, not only the CLI. Nothing is graded, nothing is spent, no run is stored. No
microVM rung works on this machine, so ``min_isolation: vm`` is one no rung can meet."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import UserError
from evalsi.runs import execute_run
from evalsi.specs import EvaluatorEntry
from evalsi.store import SqlStore
from tests.integration.run_support import model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROW = {
    "id": "r1",
    "output": "def sq(x):\n    return x * x\n",
    "reference": "def check(candidate):\n    assert candidate(3) == 9\n",
    "metadata": {"entry_point": "sq"},
}
VM = {"code-exec-tests": {"min_isolation": "vm"}}
REFUSED = "code-exec-tests runs code only in a sandbox at or above vm, and none works here"


def test_evaluate_stops_before_the_first_record(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=REFUSED):
        evalsi.evaluate([ROW], ["code-exec-tests"], params=VM, store=tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists() or SqlStore.open(tmp_path / "s.db").list_runs() == []


def test_a_run_stops_before_its_first_call(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 3)
    with StubLLM() as stub:
        spec = dataclasses.replace(
            model_spec(stub.openai_url, data),
            evaluators=(EvaluatorEntry(ref="code-exec-tests", params={"min_isolation": "vm"}),),
        )
        with pytest.raises(UserError, match=REFUSED):
            asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        assert stub.calls(OPENAI_PATH) == 0
    assert not (tmp_path / "s.db").exists() or SqlStore.open(tmp_path / "s.db").list_runs() == []


def _post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request(
        "POST", "/v1alpha1/evaluate", body=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, payload


def test_the_server_refuses_the_request(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    record = {
        "id": "r1",
        "output": {"text": ROW["output"]},
        "reference": {"text": ROW["reference"]},
        "metadata": {"entry_point": "sq"},
    }
    body = {
        "records": [record],
        "evaluators": [{"ref": "code-exec-tests", "params": {"min_isolation": "vm"}}],
    }
    with serving(state) as srv:
        status, answer = _post(srv.url, body)
    assert status == 400, answer
    assert REFUSED in answer["message"]
    assert state.store.list_runs() == []
    state.store.close()

"""Findings of the server review, each pinned: bad input that used to reach a 500 (or a 503)
now gets a 400 naming the field, and a run whose store cannot open never leaves its creator
waiting."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import StoreError, UserError
from evalsi.server._run_manager import RunManager
from evalsi.server._runs import RunHandler
from evalsi.store import SqlStore
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import server_state, serving


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with serving(server_state(tmp_path)) as server:
        yield server.url


def _call(url: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path,
        data=data,
        method="POST" if data else "GET",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_result_page_tokens_that_are_not_small_numbers_are_a_400(url: str) -> None:
    one = {"records": [{"id": "1", "output": {"text": "a"}}], "evaluators": [{"ref": "length"}]}
    status, _ = _call(url, "/v1alpha1/evaluate", one)
    assert status == 200
    for token in ("%C2%B2", "9" * 5000, "-1"):
        status, body = _call(url, f"/v1alpha1/runs/latest/results?pageToken={token}")
        assert (status, body["code"]) == (400, "invalid_argument"), token
        assert body["message"].startswith("page_token:")


def test_nul_characters_are_refused_as_bad_input(url: str) -> None:
    status, body = _call(url, "/v1alpha1/runs/a%00b")
    assert status == 400
    assert body["message"] == "id: contains a NUL character"
    status, body = _call(url, "/v1alpha1/runs?kind=%00")
    assert status == 400
    assert body["message"].startswith("kind:")
    bad = {"records": [{"id": "a\u0000b"}], "evaluators": [{"ref": "length"}]}
    status, body = _call(url, "/v1alpha1/evaluate", bad)
    assert status == 400
    assert body["message"] == "records[0].id: contains a NUL character"


def test_dataset_rows_with_nan_or_infinity_are_refused_naming_the_field(url: str) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        raw = f'{{"name": "nums", "rows": [{{"ok": 1}}, {{"x": {{"y": [1, {literal}]}}}}]}}'
        request = urllib.request.Request(
            url + "/v1alpha1/datasets",
            data=raw.encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        body = json.loads(caught.value.read())
        assert caught.value.code == 400
        assert body["message"].startswith("rows[1].x.y[1]: "), body


def test_a_run_whose_store_cannot_open_fails_its_create_instead_of_hanging(
    tmp_path: Path,
) -> None:
    class Broken(RunManager):
        def _open_store(self) -> SqlStore:
            raise StoreError("simulated: cannot connect")

    (tmp_path / "qa.jsonl").write_text('{"id": "1", "input": "q", "reference": "a"}\n')
    state = server_state(tmp_path, datasets_dir=tmp_path, runs=False)
    state.runs = Broken(state)
    handler = RunHandler(state)
    message = run_message(run_doc("http://127.0.0.1:9/v1", "qa.jsonl"))

    async def create() -> Any:
        from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb

        await state.runs.start()
        try:
            return await asyncio.wait_for(
                handler.create_run(pb.CreateRunRequest(run=message), None), timeout=20
            )
        finally:
            await state.runs.stop()

    with pytest.raises((StoreError, UserError), match="simulated"):
        asyncio.run(create())
    state.store.close()

"""PromotionService over a real server: a run's failing tasks appended to a project dataset
over Connect (the client) and REST, deduplicated by row id on a second promotion, project
scoping (another project's run is not found), and bad requests answered 400 naming the field."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import evalsi
from evalsi.core import NotFoundError, UserError
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

GOOD = {f"q{i}": f"a{i}" for i in range(12)}


def odd_wrong(text: str) -> str:
    return "wrong" if int(text[1:]) % 2 else GOOD[text]


def _recorded_run(tmp: Path) -> str:
    rows = [{"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"} for i in range(12)]
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = run_spec_from_yaml(
        f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: prod}}
spec:
  target: {{python: "{__name__}:odd_wrong"}}
  dataset: {{path: data.jsonl}}
  evaluators: [{{ref: exact-match}}]
""",
        base_dir=tmp,
    )
    db = SqlStore.open(tmp / "s.db")
    try:
        return asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
    finally:
        db.close()


def test_promote_a_run_over_connect_and_rest(tmp_path: Path) -> None:
    run_id = _recorded_run(tmp_path)
    state = server_state(tmp_path)
    with serving(state) as server, evalsi.Client(server.url) as client:
        first = client.promote("regressions", run_id=run_id, failing_only=True)
        assert first["rows_added"] == 6
        assert first["rows_skipped"] == 0
        assert first["scanned"] == 12
        got = client.get_dataset("regressions", page_size=100)
        assert got.dataset.version == first["version"]
        assert [r["id"] for r in got.rows] == ["s1", "s3", "s5", "s7", "s9", "s11"]
        assert got.rows[0]["output"] == "wrong"
        assert got.rows[0]["metadata"]["promoted"]["run_id"] == run_id
        again = client.promote("regressions", run_id=run_id, failing_only=True)
        assert (again["rows_added"], again["rows_skipped"]) == (0, 6)
        assert again["version"] == first["version"]
        # REST: every task this time; the 6 passing ones are new
        response = httpx.post(
            f"{server.url}/v1alpha1/datasets/regressions:promote",
            json={"runId": run_id, "limit": 50},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert int(body["rowsAdded"]) == 6
        assert int(body["rowsSkipped"]) == 6
        rows = client.get_dataset("regressions", page_size=100).rows
        assert sorted(r["id"] for r in rows) == sorted(f"s{i}" for i in range(12))


def test_another_projects_run_is_not_found_and_bad_requests_name_the_field(
    tmp_path: Path,
) -> None:
    run_id = _recorded_run(tmp_path)
    state = server_state(tmp_path)
    with serving(state) as server:
        with evalsi.Client(server.url, project="other") as other, pytest.raises(NotFoundError):
            other.promote("regressions", run_id=run_id)
        with evalsi.Client(server.url) as client:
            with pytest.raises(UserError, match="dataset"):
                client.promote("Bad Name!", run_id=run_id)
            with pytest.raises(UserError, match="run_id or traces"):
                client.promote("regressions")
        bad: list[tuple[str, dict[str, Any], str]] = [
            ("ok", {"runId": run_id, "limit": 20000}, "limit"),
            ("ok", {"runId": run_id, "evaluators": ["nope"]}, "evaluator"),
        ]
        for name, body, field in bad:
            response = httpx.post(f"{server.url}/v1alpha1/datasets/{name}:promote", json=body)
            assert response.status_code == 400, response.text
            assert field in response.text

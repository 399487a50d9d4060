"""Concurrent appends to one dataset lose no row: PromoteRequests (``PromotionHandler``) and an
online policy's promotions (``DatasetPromoter``) of one project take the same lock
(``ServerState.dataset_append_lock``), so no append is built on a version another one already
replaced. Before the shared lock each side held its own, and a row could vanish."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

from evalsi._proto.evalsi.v1alpha1 import promotion_service_pb2 as pb
from evalsi.runs import execute_run
from evalsi.server._policies import DatasetPromoter, default_engine
from evalsi.server._promotion import PromotionHandler
from evalsi.server._state import ServerState
from evalsi.specs import run_spec_from_yaml
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state

RUNS = 4
ROWS_PER_RUN = 6
POLICY_ROWS = 24


def always_wrong(text: str) -> str:
    return f"not {text}"


def _run(state: ServerState, tmp: Path, k: int) -> str:
    data = tmp / f"d{k}.jsonl"
    rows = [{"id": f"r{k}s{i}", "input": f"q{i}", "reference": f"a{i}"} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = run_spec_from_yaml(
        f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: run{k}}}
spec:
  target: {{python: "{__name__}:always_wrong"}}
  dataset: {{path: {data.name}}}
  evaluators: [{{ref: exact-match}}]
""",
        base_dir=tmp,
    )
    return asyncio.run(execute_run(spec, store=state.store, registry=BUILTINS)).run_id


def _ids(state: ServerState, dataset: str) -> list[str]:
    files = state.dataset_files("default")
    latest = files.get(dataset)
    return [r["id"] for r in files.rows(latest, 0, 10_000)]


def test_concurrent_promotions_and_policy_promotions_lose_no_row(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    runs = [_run(state, tmp_path, k) for k in range(RUNS)]
    handler = PromotionHandler(state)
    promoter = DatasetPromoter(state.dataset_files, state.dataset_append_lock)

    async def main() -> list[object]:
        requests = [
            handler.promote(pb.PromoteRequest(dataset="regr", run_id=r, failing_only=True), None)
            for r in runs
        ]
        policy = [
            promoter.promote("default", "regr", {"id": f"p{j}", "input": f"t{j}"})
            for j in range(POLICY_ROWS)
        ]
        calls = [*requests, *policy]
        random.Random(0).shuffle(calls)
        return list(await asyncio.gather(*calls))

    try:
        done = asyncio.run(main())
        assert len(done) == RUNS + POLICY_ROWS
        ids = _ids(state, "regr")
        expected = {f"p{j}" for j in range(POLICY_ROWS)} | {
            f"r{k}s{i}" for k in range(RUNS) for i in range(ROWS_PER_RUN)
        }
        assert len(ids) == len(expected)  # nothing lost, nothing twice
        assert set(ids) == expected
    finally:
        state.store.close()


def test_the_servers_engine_and_handler_share_the_projects_lock(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    try:
        engine = default_engine(state)
        promoter = engine.promoter
        assert isinstance(promoter, DatasetPromoter)
        assert promoter.lock_of("default") is state.dataset_append_lock("default")
        assert promoter.lock_of("") is state.dataset_append_lock("default")
        assert state.dataset_append_lock("a") is not state.dataset_append_lock("b")
    finally:
        state.store.close()


def test_a_policy_promoted_trajectory_is_served_back(tmp_path: Path) -> None:
    from evalsi.wire import struct_to_proto

    state = server_state(tmp_path, runs=False)
    promoter = DatasetPromoter(state.dataset_files, state.dataset_append_lock)
    big = 1_796_284_368_903_806_028
    row = {
        "id": "t",
        "input": "q",
        "trajectory": {"steps": [{"kind": "agent", "end_time_unix_nano": big}]},
    }
    try:
        assert asyncio.run(promoter.promote("default", "p", row)) is not None
        files = state.dataset_files("default")
        (stored,) = files.rows(files.get("p"), 0, 10)
        assert stored["trajectory"]["steps"][0]["end_time_unix_nano"] == str(big)
        struct_to_proto(stored)  # what GetDataset sends
    finally:
        state.store.close()

"""The same Score and Run give the same metrics on a PostgreSQL store as on SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import evalsi
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from tests.integration.run_support import write_qa
from tests.support.registry import BUILTINS

ROWS = [{"id": f"r{i}", "output": "yes" if i % 3 else "no", "reference": "yes"} for i in range(30)]


def answer(question: str) -> str:
    return "a" + question[1:] if int(question[1:]) % 4 else "wrong"


def _metrics(result: Any) -> list[dict[str, Any]]:
    try:
        d = result.to_dict()
        return [{k: v for k, v in m.items() if k not in ("run_id",)} for m in d["metrics"]]
    finally:
        if result.store is not None:
            result.store.close()


def test_evaluate_on_postgres_matches_sqlite(tmp_path: Path, pg_url: str) -> None:
    lite = evalsi.evaluate(ROWS, ["exact-match"], store=tmp_path / "s.db")
    pg = evalsi.evaluate(ROWS, ["exact-match"], store=pg_url)
    assert _metrics(pg) == _metrics(lite)
    assert pg.metric("exact-match").n == 30


def test_python_target_run_on_postgres_matches_sqlite(tmp_path: Path, pg_url: str) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 16)
    spec = RunSpec(
        name="py",
        target=TargetSpec(kind="python", python=f"{__name__}:answer"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=2,
        max_concurrency=4,
    )
    lite = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
    pg = asyncio.run(execute_run(spec, store=pg_url, registry=BUILTINS))
    assert pg.tasks == lite.tasks == {"ok": 32}
    assert pg.metric("exact-match").n == 32
    assert _metrics(pg) == _metrics(lite)

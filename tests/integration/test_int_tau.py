"""The τ²-style tau-mini domain as agent runs: its tasks imported with a simulated user, its
tools over each task's db.json, graded by replaying the expected actions on a fresh database.
The known-good agent (the expected actions, with the scripted user) passes every task; the
agent that does nothing fails the tasks that change the database and passes the one that
must leave it alone (the database check sees nothing else, as τ²'s)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.benchmarks import replay_actions, tau_rows, tau_run_spec
from evalsi.core import UserError
from evalsi.runs._execute import execute_run
from evalsi.specs import load_run_spec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents-simulator"


@pytest.fixture
def tools() -> Iterator[Any]:
    sys.path.insert(0, str(EXAMPLE))
    import tau_mini_tools

    yield tau_mini_tools
    sys.path.remove(str(EXAMPLE))


def _run(tmp_path: Path, variant: str, tools: Any) -> tuple[Any, dict[str, Any]]:
    spec_path = tau_run_spec(
        EXAMPLE / "tau-mini",
        "tau_mini_tools",
        tmp_path / variant,
        agent={"connector": "scripted", "model": variant},
        user={"connector": "scripted", "model": "turns"},
        tool_names=tools.TOOLS,
        writes=tools.WRITES,
    )
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(execute_run(load_run_spec(spec_path), store=db, registry=BUILTINS))
    from evalsi.runs import iter_tasks

    return result, {t["sample_id"]: t for t in iter_tasks(db, result.run_id, 100)}


def test_the_known_good_agent_passes_and_the_empty_one_fails(tmp_path: Path, tools: Any) -> None:
    gold, tasks = _run(tmp_path, "gold", tools)
    assert gold.tasks == {"ok": 3}
    assert gold.metric("task-success").mean == 1.0
    cancel = tasks["0"]["trajectory"]
    assert [s.get("tool") for s in cancel["steps"] if s["type"] == "tool_call"] == [
        "get_user_details",
        "get_order_details",
        "cancel_pending_order",
    ]
    assert cancel["stop_reason"] == "user_stop"  # the scripted user had nothing more to say
    left = cancel["end_state"]["files"]["db.json"]["json"]
    assert left["orders"]["#W100"]["status"] == "cancelled"

    empty, tasks = _run(tmp_path, "empty", tools)
    assert empty.metric("task-success").mean == 1 / 3
    verdicts = {k: t["scores"][0]["scores"]["task-success"] for k, t in tasks.items()}
    assert verdicts == {"0": False, "1": False, "2": True}
    detail = tasks["1"]["trajectory"]["checks"][0]["detail"]
    assert "$.users.ben_okafor_5678.address.city" in detail
    assert tasks["0"]["trajectory"]["stop_reason"] == "agent_stop"  # it said nothing


def test_rows_carry_the_user_the_database_and_the_expected_actions(tools: Any) -> None:
    rows = tau_rows(EXAMPLE / "tau-mini", "tau_mini_tools")
    row = rows[1]
    assert row["input"] == "You moved and want your default address changed."
    user = row["metadata"]["user"]
    assert "Abuja" in user["hidden"]
    assert "do not know" in user["hidden"]
    assert "Abuja" not in row["input"]
    assert "Say yes" in user["goal"]
    assert row["metadata"]["fixtures"]["files"]["db.json"]["users"]["ben_okafor_5678"]


def test_a_failing_expected_action_changes_nothing(tools: Any) -> None:
    initial = {"users": {}, "orders": {"#1": {"status": "delivered"}}}
    after = replay_actions(
        "tau_mini_tools",
        [{"name": "cancel_pending_order", "arguments": {"order_id": "#1", "reason": "x"}}],
        initial,
    )
    assert after == initial


def test_a_directory_that_is_not_a_domain_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a τ² domain"):
        tau_rows(tmp_path, "tau_mini_tools")
    shutil.copy(EXAMPLE / "tau-mini" / "db.json", tmp_path / "db.json")
    (tmp_path / "tasks.json").write_text('[{"id": "x"}]')
    with pytest.raises(UserError, match="task 0: missing 'user_scenario'"):
        tau_rows(tmp_path, "tau_mini_tools")

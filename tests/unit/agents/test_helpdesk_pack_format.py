"""The seed domain pack's files hold together (examples/agent/helpdesk): twenty scenarios or more
in four categories over eight cases, each with its case's fixtures, an expected end state,
reference calls and known-good and known-bad trajectories; faults and injections land on tools
only the robustness scenarios call; the three specs share one environment. Playing the
trajectories is tests/integration/test_int_helpdesk_pack.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evalsi.datasets import read_trajectory
from evalsi.specs import load_run_spec

PACK = Path(__file__).resolve().parents[3] / "examples" / "agent" / "helpdesk"
CATEGORIES = {"task-execution", "tool-calling", "policy-compliance", "robustness"}


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (PACK / name).read_text().splitlines() if line.strip()]


SCENARIOS = _rows("scenarios.jsonl")
CASES = {c["id"]: c for c in _rows("cases.jsonl")}


def _calls(trajectory: Any) -> list[str]:
    return [s.tool_call.name for s in read_trajectory(trajectory).steps if s.tool_call]


def test_twenty_scenarios_in_four_categories_over_eight_cases() -> None:
    assert len(SCENARIOS) >= 20
    ids = [s["id"] for s in SCENARIOS]
    inputs = [s["input"] for s in SCENARIOS]
    assert len(set(ids)) == len(ids)
    assert len(set(inputs)) == len(inputs)  # the stub model keys its first turn on the input
    per = Counter(s["metadata"]["category"] for s in SCENARIOS)
    assert set(per) == CATEGORIES
    assert min(per.values()) >= 4
    assert len(CASES) == 8
    assert {s["metadata"]["case"] for s in SCENARIOS} == set(CASES)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_each_scenario_is_complete(scenario: dict[str, Any]) -> None:
    meta = scenario["metadata"]
    assert meta["fixtures"] == {"files": CASES[meta["case"]]["files"]}
    assert set(meta["expected_state"]) >= {"customers", "refunds", "outbox"}
    assert isinstance(scenario["reference"]["tool_calls"], list)
    assert meta["bad_because"]
    good, bad = meta["known"]["good"], meta["known"]["bad"]
    for known in (good, bad):
        steps = read_trajectory(known).steps
        assert steps[-1].kind == "message"
        assert steps[-1].output
    assert good != bad
    # the reference is the good run's executed calls: the gated ones never run
    executed = [c for c in _calls(good) if c not in ("issue_refund", "delete_customer")]
    assert [c["name"] for c in scenario["reference"]["tool_calls"]] == executed


def test_faults_and_injections_land_on_tools_only_robustness_scenarios_call() -> None:
    spec = load_run_spec(PACK / "run-scripted-good.yaml")
    env = spec.environment
    assert env is not None
    scheduled = {f["tool"] for f in env.faults} | {i["tool"] for i in env.injections}
    assert scheduled == {"track_shipment", "get_invoice", "read_ticket"}
    for s in SCENARIOS:
        called = set(_calls(s["metadata"]["known"]["good"]) + _calls(s["metadata"]["known"]["bad"]))
        if s["metadata"]["category"] == "robustness":
            assert called & scheduled, s["id"]
        else:
            assert not called & scheduled, s["id"]


def test_the_specs_share_one_environment_and_differ_in_the_model() -> None:
    good, bad, stub = (
        load_run_spec(PACK / f"run-{name}.yaml")
        for name in ("scripted-good", "scripted-bad", "stub")
    )
    assert good.environment == bad.environment == stub.environment
    assert good.evaluators == bad.evaluators == stub.evaluators
    assert (good.target.connector, good.target.model) == ("scripted", "good")
    assert (bad.target.connector, bad.target.model) == ("scripted", "bad")
    assert stub.target.connector == "openai-compatible"
    assert good.trials == bad.trials == 3


def test_the_stub_script_starts_every_scenario() -> None:
    script = json.loads((PACK / "stub-script.json").read_text())
    for s in SCENARIOS:
        first = _calls(s["metadata"]["known"]["good"])
        if first:
            assert script["tool_calls"][s["input"]][0]["name"] == first[0], s["id"]
        else:
            assert s["input"] in script["answers"], s["id"]

"""Promotion from production traces, end to end: the OpenTelemetry SDK exports agent turns to a
real server, an online policy grades them (two fail), a user's thumbs down flags a third that
passed; then the flagged traces become dataset rows through ``Client.promote(traces=True)``,
through ``evalsi promote --traces --server URL --dataset NAME``, and through the embedded
``evalsi promote --traces`` reading the same store file, each row with ``metadata.promoted``
saying which trace and why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import evalsi
from evalsi.cli import main as cli_main
from evalsi.core import Feedback
from evalsi.server._state import TracesConfig
from tests.support.policy_traces import SUPPORT, agent_turn, wait_for
from tests.support.server_state import server_state, serving

PROJECT = "team-a"
OUTPUTS = {"thanked": "thanks a lot", "refused": "no", "curt": "go away", "rude": "thanks, bye"}
FAILING = {"refused", "curt"}  # the policy's `contains: thanks` fails on them


@dataclass
class Served:
    url: str
    tmp: Path
    ids: dict[str, str]  # turn -> trace id

    def key(self, trace_id: str) -> str:
        return next(k for k, v in self.ids.items() if v == trace_id)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("promotetraces")
    state = server_state(tmp, runs=False, traces=TracesConfig(grace_s=0.05))
    with serving(state) as server, evalsi.Client(server.url, project=PROJECT) as client:
        client.apply_policy(SUPPORT)
        ids = {}
        for key, output in OUTPUTS.items():
            trace_id, _, spans = agent_turn(output, user=f"u-{key}")
            ids[key] = trace_id
            exporter = OTLPSpanExporter(
                endpoint=f"{server.url}/v1/traces", headers={"x-evalsi-project": PROJECT}
            )
            assert exporter.export(spans).name == "SUCCESS"
            exporter.shutdown()  # type: ignore[no-untyped-call]
        wait_for(
            "the policy to grade every turn",
            lambda: client.policy_stats("support").evaluated == len(OUTPUTS),
        )
        client.post_feedback(
            Feedback(trace_id=ids["rude"], name="thumbs", value=-1, comment="curt reply")
        )
        client.post_feedback(Feedback(trace_id=ids["thanked"], name="thumbs", value=1))
        yield Served(server.url, tmp, ids)


def _by_key(served: Served, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {served.key(r["id"]): r for r in rows}


def _check_rows(served: Served, rows: list[dict[str, Any]], keys: set[str]) -> None:
    by_key = _by_key(served, rows)
    assert set(by_key) == keys
    for key, row in by_key.items():
        assert row["input"] == "my order is late"
        assert row["output"] == OUTPUTS[key]
        promoted = row["metadata"]["promoted"]
        assert promoted["from"] == "trace"
        assert promoted["trace_id"] == served.ids[key] == row["id"]
        assert promoted["format"] == 1
        reasons = promoted["reasons"]
        if key in FAILING:
            assert {(r["evaluator"], r["outcome"]) for r in reasons} == {("contains", "failed")}
        else:
            assert (
                reasons
                == [{"feedback": "thumbs", "value": -1, "label": None, "comment": "curt reply"}]
                or reasons[0]["feedback"] == "thumbs"
            )
            assert reasons[0]["value"] == -1


def test_the_client_promotes_failing_and_thumbed_down_traces(served: Served) -> None:
    with evalsi.Client(served.url, project=PROJECT) as client:
        done = client.promote("flagged", traces=True, failing_only=True, negative_feedback=True)
        assert (done["rows_added"], done["rows_skipped"]) == (3, 0)
        rows = client.get_dataset("flagged", page_size=100).rows
        _check_rows(served, rows, FAILING | {"rude"})
        again = client.promote("flagged", traces=True, failing_only=True, negative_feedback=True)
        assert (again["rows_added"], again["rows_skipped"]) == (0, 3)
        assert again["version"] == done["version"]
        only_feedback = client.promote("thumbs", traces=True, negative_feedback=True)
        assert only_feedback["rows_added"] == 1
        _check_rows(served, client.get_dataset("thumbs", page_size=100).rows, {"rude"})
    with evalsi.Client(served.url) as default:  # the traces are team-a's
        nothing = default.promote("flagged", traces=True, failing_only=True)
        assert nothing["rows_added"] == 0


def test_the_cli_promotes_traces_into_a_server_dataset(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["promote", "--traces", "--server", served.url, "--project", PROJECT]
    assert cli_main([*base, "--failing", "--dataset", "cli-failing", "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rows_added"], summary["project"]) == (2, PROJECT)
    with evalsi.Client(served.url, project=PROJECT) as client:
        _check_rows(served, client.get_dataset("cli-failing", page_size=100).rows, FAILING)
    assert cli_main([*base, "--failing", "-o", "x.jsonl"]) == 2
    assert "-o cannot be combined with --server" in capsys.readouterr().err


def test_the_embedded_command_reads_the_same_store(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "flagged.jsonl"
    args = ["promote", "--traces", "--failing", "--feedback", "negative"]
    store = ["--store", str(served.tmp / "s.db"), "--project", PROJECT]
    assert cli_main([*args, *store, "-o", str(out), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    _check_rows(served, rows, FAILING | {"rude"})
    # the rows grade back as what production answered
    graded = evalsi.evaluate(str(out), [{"ref": "contains", "params": {"values": ["thanks"]}}])
    assert graded.metric("contains").mean == pytest.approx(1 / 3)

"""The report's warning on gates that read an uncalibrated judge: when it appears, when a
calibration of the same judge, template and params makes it go, and how reports show it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.reports import render_report
from evalsi.runs import calibrate_async, uncalibrated_gates
from evalsi.runs.calibration._gates import gate_evaluators
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.stub_llm import StubLLM
from tests.unit.runs.calibration.calibration_support import RUBRIC, judges_for, rating_rows

VERDICT = '{"score": 4, "explanation": "fine"}'
PARAMS = {"rubric": RUBRIC, "scale": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("metric('llm-judge').mean >= 0.8", ["llm-judge"]),
        ('metric("llm-judge", "llm-judge-passed").mean > 0.5', ["llm-judge"]),
        ("metric('judge/llm-judge').ci.low > 0.5 && metric( 'em' ).n > 3", ["judge", "em"]),
        ("metric('em').mean > 0.1 || metric('em').n > 1", ["em"]),
        ("1 > 0", []),
    ],
)
def test_gate_evaluators(expr: str, names: list[str]) -> None:
    assert gate_evaluators(expr) == names


def _evaluate(store: SqlStore, url: str, gates: list[str], **params: Any) -> str:
    result = evalsi.evaluate(
        [
            {k: v for k, v in row.items() if k != "labels"} | {"reference": "x"}
            for row in rating_rows()
        ],
        [
            {"ref": "llm-judge", "params": {**PARAMS, **params}},
            {"ref": "exact-match", "name": "em"},
        ],
        gates=gates,
        judges=judges_for(url),
        store=store,
    )
    return result.run_id


def test_a_gate_on_an_uncalibrated_judge_warns_until_it_is_calibrated(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "evalsi.db")
    judge_gate = "metric('llm-judge').mean >= 0.5"
    with StubLLM(default=VERDICT) as stub:
        run_id = _evaluate(store, stub.openai_url, [judge_gate, "metric('em').n >= 1"])
        (warning,) = uncalibrated_gates(store, store.get_run(run_id))
        assert f"gate `{judge_gate}` depends on judge 'default' (model judge-model)" in warning
        assert "through llm-judge" in warning
        assert "llm-judge/v1" in warning
        assert "evalsi calibrate --judge llm-judge" in warning
        # gates on other evaluators, and runs without gates, need no calibration
        only_em = _evaluate(store, stub.openai_url, ["metric('em').n >= 1"])
        assert uncalibrated_gates(store, store.get_run(only_em)) == []
        assert uncalibrated_gates(store, store.get_run(_evaluate(store, stub.openai_url, []))) == []

        asyncio.run(
            calibrate_async(
                rating_rows(), "llm-judge", params=PARAMS, judges=judges_for(stub.openai_url),
                store=store, registry=BUILTINS,)
        )  # fmt: skip
        assert uncalibrated_gates(store, store.get_run(run_id)) == []
        # another rubric is another judge to calibrate; so is another model
        other = _evaluate(store, stub.openai_url, [judge_gate], rubric="Is it polite?")
        assert len(uncalibrated_gates(store, store.get_run(other))) == 1
    store.close()


def test_reports_show_the_warning_in_the_gates_section(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "evalsi.db")
    with StubLLM(default=VERDICT) as stub:
        run_id = _evaluate(store, stub.openai_url, ["metric('llm-judge').mean >= 0.5"])
    md = render_report(store, run_id, fmt="md")
    gates = md[md.index("## Gates") :]
    assert (
        "> **warning:** gate `metric('llm-judge').mean >= 0.5` depends" in gates
    )  # code, unescaped
    assert "not calibrated" in gates
    html = render_report(store, run_id, fmt="html")
    section = html[html.index('<section id="gates">') :]
    section = section[: section.index("</section>")]
    assert '<p class="warn">gate `metric(&#39;llm-judge&#39;).mean &gt;= 0.5` depends' in section
    store.close()

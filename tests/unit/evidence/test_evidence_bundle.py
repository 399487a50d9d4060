"""Bundles end to end in process: a declared Run sealed, validated, gated and rescored.

The agent answers from a table the test controls, so every figure below is worked out by
hand from it: which scenarios pass, which trial fails (a flaky case), which task is lost to
infrastructure (not evaluated), and what each threshold then says.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi.connectors import InfraError, TargetOutput
from evalsi.core import Content, SpecError
from evalsi.evidence import gate_bundle, rescore_bundle, validate_bundle, write_bundle
from evalsi.runs._execute import execute_run
from evalsi.specs import (
    CasePolicy,
    DatasetSpec,
    Declaration,
    EvaluatorEntry,
    RunSpec,
    TargetSpec,
    Threshold,
)
from evalsi.store import SqlStore
from tests.support.bundles import reseal as _reseal
from tests.support.registry import BUILTINS

# scenario -> (category, answers per trial); the reference is always "ok".
PLAN = {
    "a1": ("alpha", ["ok", "ok"]),
    "a2": ("alpha", ["ok", "ok"]),
    "a3": ("alpha", ["ok", "no"]),  # flaky: one trial of two passes
    "b1": ("beta", ["ok", "ok"]),
    "b2": ("beta", ["no", "no"]),
    "c1": ("gamma", ["ok", "LOST"]),  # its second trial is lost to infrastructure
}
CALLS: dict[str, int] = {}


def agent(question: str) -> TargetOutput:
    """Answers each scenario's trials in the order the table gives (trials run in order per
    scenario here: concurrency 1)."""
    n = CALLS.get(question, 0)
    CALLS[question] = n + 1
    answer = PLAN[question][1][n % 2]
    if answer == "LOST":
        raise InfraError("connection", "the agent host went away")
    return TargetOutput(output=Content.of_text(answer))


def _data(tmp: Path) -> Path:
    path = tmp / "scenarios.jsonl"
    path.write_bytes(
        b"".join(
            orjson.dumps(
                {"id": sid, "input": sid, "reference": "ok", "metadata": {"category": cat}}
            )
            + b"\n"
            for sid, (cat, _) in PLAN.items()
        )
    )
    return path


def _run(
    tmp: Path, *, declaration: Declaration | None, thresholds: tuple[Threshold, ...] = ()
) -> tuple[Path, str]:
    CALLS.clear()
    spec = RunSpec(
        name="evidence",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(_data(tmp))),
        evaluators=(
            EvaluatorEntry(ref="exact-match"),
            EvaluatorEntry(ref="contains", params={"values": ["o"]}),
        ),
        trials=2,
        max_concurrency=1,
        declaration=declaration,
        thresholds=thresholds,
    )
    store = tmp / "s.db"
    db = SqlStore.open(store)
    try:
        run_id = asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
    finally:
        db.close()
    return store, run_id


SPEC_THRESHOLDS = (
    Threshold(category="alpha", min=0.6),
    Threshold(category="beta", min=0.5, kind="comparative"),
    Threshold(metric="exact-match", min=0.5),
)
DECLARED = Declaration(
    system={"name": "echo-agent", "version": "1"},
    thresholds=(Threshold(category="alpha", min=0.6, statistic="pass_rate", source="declaration"),),
)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    tmp = tmp_path_factory.mktemp("bundle")
    store, run_id = _run(tmp, declaration=DECLARED, thresholds=SPEC_THRESHOLDS)
    db = SqlStore.open(store)
    try:
        write_bundle(db, run_id, tmp / "bundle")
    finally:
        db.close()
    return tmp / "bundle", run_id, store


def _copy(bundle: Path, tmp: Path) -> Path:
    out = tmp / "copy"
    shutil.copytree(bundle, out)
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_sealed_run_validates_and_holds_what_happened(sealed: tuple[Path, str, Path]) -> None:
    bundle, run_id, _ = sealed
    v = validate_bundle(bundle)
    assert v.exit_code == 0, v.findings
    assert (v.run_id, v.tasks, v.declared) == (run_id, 12, True)  # the lost task is stored too
    records = _lines(bundle / "records.jsonl")
    assert [(r["seq"], r["trial"]) for r in records][:3] == [(0, 0), (0, 1), (1, 0)]
    assert {r["status"] for r in records} == {"ok", "infra_error"}
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    assert [f["path"] for f in manifest["files"]][-1] == "report.md"
    names = sorted(p.name for p in bundle.iterdir())
    assert names == sorted([*manifest["required"], "manifest.json"])


def test_cases_say_who_passed_was_flaky_or_was_not_evaluated(
    sealed: tuple[Path, str, Path],
) -> None:
    bundle, _, _ = sealed
    cases = {c["id"]: c for c in _lines(bundle / "cases.jsonl")}
    assert (cases["a1"]["status"], cases["a1"]["passed"], cases["a1"]["flaky"]) == (
        "complete",
        2,
        False,
    )
    assert (cases["a3"]["passed"], cases["a3"]["eligible"], cases["a3"]["flaky"]) == (1, 2, True)
    assert cases["b2"]["passed"] == 0
    assert cases["c1"]["status"] == "partial"
    assert cases["c1"]["excluded"] == {"infra_error": 1}
    summary = orjson.loads((bundle / "summary.json").read_bytes())
    alpha = next(c for c in summary["categories"] if c["category"] == "alpha")
    assert alpha["pass_hat_k"] == {
        "value": 2 / 3,
        "numerator": 2,
        "denominator": 3,
        "exclusions": {},
        "state": "measured",
    }
    assert (alpha["pass_rate"]["numerator"], alpha["pass_rate"]["denominator"]) == (5, 6)
    assert summary["overall"]["flaky_ids"] == ["a3"]
    assert summary["overall"]["not_evaluated"] == ["c1"]


def test_the_gate_judges_the_registered_thresholds(sealed: tuple[Path, str, Path]) -> None:
    bundle, _, _ = sealed
    g = gate_bundle(bundle)
    by = {(r.threshold.category, r.threshold.metric, r.threshold.statistic): r for r in g.results}
    alpha = by[("alpha", "", "pass_hat_k")]
    assert alpha.verdict == "met"
    assert alpha.value == pytest.approx(2 / 3)  # 0.667 >= 0.6
    # The declaration added a pass-rate bound: 5/6 >= 0.6.
    assert by[("alpha", "", "pass_rate")].threshold.source == "declaration"
    beta = by[("beta", "", "pass_hat_k")]
    assert (beta.verdict, beta.gates) == ("met", False)  # comparative: reported only
    metric = by[("", "exact-match", "mean")]
    # The run's exact-match scores: a1 2, a2 2, a3 1, b1 2, b2 0, c1 1 of 11 stored tasks.
    assert metric.value == pytest.approx(8 / 11)
    # gamma's c1 is not fully evaluated, and the metric threshold covers every scenario.
    assert metric.verdict == "not_evaluated"
    assert metric.not_evaluated == ["c1"]
    assert g.exit_code == 1
    assert "metric exact-match" in g.reason


def test_a_missed_hard_threshold_fails_and_a_comparative_one_never_gates(tmp_path: Path) -> None:
    thresholds = (
        Threshold(category="beta", min=0.75),  # beta: 1 of 2 scenarios pass^k
        Threshold(category="alpha", min=1.0, kind="comparative"),
    )
    declaration = Declaration(system={"name": "x"})
    store, run_id = _run(tmp_path, declaration=declaration, thresholds=thresholds)
    db = SqlStore.open(store)
    write_bundle(db, run_id, tmp_path / "b")
    db.close()
    g = gate_bundle(tmp_path / "b")
    assert g.exit_code == 1
    assert [r.threshold.category for r in g.missed] == ["beta"]


def test_a_run_without_a_declaration_cannot_be_judged(tmp_path: Path) -> None:
    store, run_id = _run(tmp_path, declaration=None, thresholds=SPEC_THRESHOLDS)
    db = SqlStore.open(store)
    write_bundle(db, run_id, tmp_path / "b")
    db.close()
    assert validate_bundle(tmp_path / "b").exit_code == 0
    g = gate_bundle(tmp_path / "b")
    assert g.exit_code == 2
    assert "declared no system" in g.reason
    plan = orjson.loads((tmp_path / "b" / "test_plan.json").read_bytes())
    assert plan["declared"] is False
    assert plan["scenarios"]["listed"] is False


def test_rescore_matches_then_differs_after_an_edited_score(
    sealed: tuple[Path, str, Path], tmp_path: Path
) -> None:
    bundle, _, _ = sealed
    assert rescore_bundle(bundle).outcome == "MATCH"
    copy = _copy(bundle, tmp_path)
    lines = _lines(copy / "scores.jsonl")
    target = next(
        i
        for i, line in enumerate(lines)
        if line["outcome"] == "scored" and line["scores"][0].get("passed") is False
    )
    lines[target]["scores"][0]["passed"] = True
    (copy / "scores.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    assert validate_bundle(copy).exit_code == 1  # the hash moved
    _reseal(copy)
    # Re-hashed, the edit still shows: the cases and metrics no longer follow from the scores.
    v = validate_bundle(copy)
    assert v.exit_code == 1
    assert any("cases.jsonl" in f or "summary.json" in f for f in v.findings)
    r = rescore_bundle(copy)
    assert r.exit_code == 2  # cannot rescore what does not validate


def test_rescore_differs_when_the_edit_is_carried_through_every_file(
    sealed: tuple[Path, str, Path], tmp_path: Path
) -> None:
    """A forger who rewrites the score, the cases, the summary and the report consistently
    passes validate; rescore, grading the records again, still finds the edited verdict."""
    bundle, _, _ = sealed
    copy = _copy(bundle, tmp_path)
    lines = _lines(copy / "scores.jsonl")
    # b2 trial 0's contains result: "no" contains "o", so it passed; say it failed instead
    # (the case of b2 fails either way, so cases and figures stay what they were).
    b2 = next(i for i, x in enumerate(lines) if (x["seq"], x["trial"], x["evaluator"]) == (4, 0, 1))
    assert lines[b2]["scores"][0]["passed"] is True
    lines[b2]["scores"][0]["passed"] = False
    (copy / "scores.jsonl").write_bytes(
        b"".join(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n" for line in lines)
    )
    summary = orjson.loads((copy / "summary.json").read_bytes())
    for m in summary["metrics"]:
        if m["evaluator"] == "contains":
            m["mean"] = (m["mean"] * m["n"] - 1) / m["n"]
    (copy / "summary.json").write_bytes(
        orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
    from evalsi.evidence._report import render_report

    config = orjson.loads((copy / "config.json").read_bytes())

    class Info:
        name = config["name"]
        kind = config["kind"]

    plan = orjson.loads((copy / "test_plan.json").read_bytes())
    gates = orjson.loads((copy / "gates.json").read_bytes())
    (copy / "report.md").write_text(render_report(plan, summary, gates, Info()), encoding="utf-8")
    _reseal(copy)
    assert validate_bundle(copy).exit_code == 0
    r = rescore_bundle(copy)
    assert (r.outcome, r.exit_code, r.differing) == ("DIFFER", 1, 1)
    d = r.differences[0]
    assert (d.seq, d.trial, d.evaluator) == (4, 0, "contains")
    assert d.recorded["scores"][0]["passed"] is False
    assert d.rescored["scores"][0]["passed"] is True


def test_rescore_says_code_changed_when_an_evaluator_file_changed(tmp_path: Path) -> None:
    ev = tmp_path / "ev.py"
    ev.write_text(
        "from evalsi import evaluator\n\n"
        "@evaluator(name='short', requires=('output',))\n"
        "def short(record) -> bool:\n"
        "    return len(record.output.as_text()) <= 2\n",
        encoding="utf-8",
    )
    data = _data(tmp_path)
    rows = [orjson.loads(line) for line in data.read_bytes().splitlines()]
    data.write_bytes(
        b"".join(
            orjson.dumps({**r, "output": r["id"] * (i + 1)}) + b"\n" for i, r in enumerate(rows)
        )
    )
    result = evalsi.evaluate(
        str(data),
        [f"{ev}:short"],
        store=str(tmp_path / "s.db"),
        registry=_code_registry(ev),
        declaration=Declaration(system={"name": "x"}),
    )
    db = SqlStore.open(tmp_path / "s.db")
    write_bundle(db, result.run_id, tmp_path / "b")
    db.close()
    assert rescore_bundle(tmp_path / "b").outcome == "MATCH"
    ev.write_text(ev.read_text(encoding="utf-8").replace("<= 2", "<= 4"), encoding="utf-8")
    r = rescore_bundle(tmp_path / "b")
    assert (r.outcome, r.exit_code) == ("CODE_CHANGED", 3)
    assert r.code["evaluators_changed"] == ["short"]
    assert r.differing == 1  # "a2a2" is 4 long: it passes now
    ev.write_text(
        ev.read_text(encoding="utf-8").replace("<= 4", "<= 2") + "\n# a comment\n", encoding="utf-8"
    )
    again = rescore_bundle(tmp_path / "b")
    assert again.outcome == "MATCH"
    assert again.code["changed"]
    ev.unlink()
    gone = rescore_bundle(tmp_path / "b")
    assert gone.exit_code == 2
    assert "short" in gone.reason


def _code_registry(ev: Path) -> Any:
    from evalsi.evaluators import load_code_evaluator
    from evalsi.packs import builtin_registry

    registry = builtin_registry(entry_points=False)
    registry.register(load_code_evaluator(f"{ev}:short"), code_ref=f"{ev}:short")
    return registry


def test_write_bundle_refuses_a_running_run_and_a_used_directory(
    sealed: tuple[Path, str, Path], tmp_path: Path
) -> None:
    _, run_id, store = sealed
    db = SqlStore.open(store)
    try:
        (tmp_path / "used").mkdir()
        (tmp_path / "used" / "x").write_text("x")
        with pytest.raises(evalsi.UserError, match="not empty"):
            write_bundle(db, run_id, tmp_path / "used")
        os.symlink(tmp_path / "elsewhere", tmp_path / "link")
        with pytest.raises(evalsi.UserError, match="symbolic link"):
            write_bundle(db, run_id, tmp_path / "link")
        assert not (tmp_path / "elsewhere").exists()
    finally:
        db.close()


def _policy_bundle(
    tmp: Path, policy: CasePolicy | None, declared: CasePolicy | None = None
) -> Path:
    declaration = Declaration(system={"name": "x"}, case_policy=declared)
    CALLS.clear()
    spec = RunSpec(
        name="policy",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(_data(tmp))),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=2,
        max_concurrency=1,
        declaration=declaration,
        case_policy=policy,
    )
    db = SqlStore.open(tmp / "s.db")
    try:
        run_id = asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
        write_bundle(db, run_id, tmp / "b")
    finally:
        db.close()
    return tmp / "b"


def test_a_case_policy_judges_each_case_after_the_run_is_found_valid(tmp_path: Path) -> None:
    g = gate_bundle(_policy_bundle(tmp_path, CasePolicy(pass_rate=0.5)))
    # a1 2/2, a2 2/2, a3 1/2 (= 0.5 passes), b1 2/2, b2 0/2, c1 1/1 (its other trial lost)
    assert [v["check"] for v in g.validity] == ["coverage", "completion", "evaluator_errors"]
    assert all(v["valid"] for v in g.validity)
    completion = g.validity[1]["rate"]
    assert (completion["numerator"], completion["denominator"]) == (11, 12)
    assert completion["exclusions"] == {"infra_error": 1}
    assert g.cases["counts"] == {"pass": 5, "fail": 1, "inconclusive": 0}
    assert g.cases["failing"] == ["b2"]
    assert g.exit_code == 1


def test_too_few_eligible_trials_make_the_run_inconclusive_not_failed(tmp_path: Path) -> None:
    g = gate_bundle(_policy_bundle(tmp_path, CasePolicy(pass_rate=0.5, min_eligible_trials=2)))
    coverage = g.validity[0]
    assert not coverage["valid"]
    assert (coverage["rate"]["numerator"], coverage["rate"]["denominator"]) == (5, 6)
    assert g.exit_code == 2
    assert g.reason.startswith("inconclusive: coverage")
    assert g.cases == {}  # no case verdict on a run that cannot be believed


def test_a_declared_case_policy_may_tighten_never_loosen(tmp_path: Path) -> None:
    g = gate_bundle(
        _policy_bundle(tmp_path, CasePolicy(pass_rate=0.5), declared=CasePolicy(pass_rate=1.0))
    )
    assert g.cases["failing"] == ["a3", "b2"]  # a3's 1/2 no longer reaches 1.0
    (tmp_path / "x").mkdir()
    with pytest.raises(SpecError, match=r"passRate 0\.2 loosens the spec's 0\.5"):
        _policy_bundle(
            tmp_path / "x", CasePolicy(pass_rate=0.5), declared=CasePolicy(pass_rate=0.2)
        )


def test_a_samples_own_pass_threshold_wins(tmp_path: Path) -> None:
    data = _data(tmp_path)
    rows = [orjson.loads(line) for line in data.read_bytes().splitlines()]
    for row in rows:
        if row["id"] == "b2":
            row["metadata"]["pass_threshold"] = 0.0  # a known-hard case: reported, not gating
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    declaration = Declaration(system={"name": "x"})
    CALLS.clear()
    spec = RunSpec(
        name="own",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=2,
        max_concurrency=1,
        declaration=declaration,
        case_policy=CasePolicy(pass_rate=0.5),
    )
    db = SqlStore.open(tmp_path / "s.db")
    try:
        run_id = asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
        write_bundle(db, run_id, tmp_path / "b")
    finally:
        db.close()
    cases = {c["id"]: c for c in _lines(tmp_path / "b" / "cases.jsonl")}
    assert cases["b2"]["pass_threshold"] == 0.0
    assert validate_bundle(tmp_path / "b").exit_code == 0
    g = gate_bundle(tmp_path / "b")
    assert (g.exit_code, g.cases["failing"]) == (0, [])

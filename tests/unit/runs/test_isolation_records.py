"""Sandbox isolation per result and per record: reading an evaluator's report, the weakest-level
rule, and the provenance ``IsolationReport`` a record gets (also read back from a stored run).

The evaluators here stand in for the code pack: they return scores carrying
``metadata["isolation"]`` exactly as ``evalsi.sandbox.Isolation.to_dict()`` makes it, chosen per
record by the record's metadata, so every mix (levels, partial/full, none at all) is data.
"""

from __future__ import annotations

from typing import Any

import evalsi
from evalsi import Record, Score, evaluator
from evalsi.core import Content, EvaluationResult, IsolationReport, Outcome
from evalsi.evaluators import Registry
from evalsi.packs import builtin_registry
from evalsi.runs import Aggregator, IsolationSummary, ReportedIsolation, record_isolation, weakest
from evalsi.runs._isolation import LEVELS, parse_isolation
from evalsi.sandbox import Isolation, Level

# -- the stand-in evaluators (imported by the other isolation tests) ---------------------------

BWRAP = Isolation("bwrap", Level.NAMESPACED).to_dict()
BWRAP_PARTIAL = Isolation("bwrap", Level.NAMESPACED, "partial", ("cgroup-memory",)).to_dict()
LANDLOCK = Isolation("landlock", Level.CONFINED, "partial", ("cgroup-pids",)).to_dict()
FIRECRACKER = Isolation("firecracker", Level.VM).to_dict()


def _scores(record: Record, key: str) -> Score:
    iso = record.metadata.get(key)
    meta: dict[str, Any] = {"isolation": iso} if iso is not None else {}
    return Score(passed=bool(record.metadata.get("ok", True)), metadata=meta)


@evaluator(name="test/iso-exec", version="1.0.0", output="passed")
def iso_exec(record: Record) -> Score:
    """Passes per ``metadata.ok``; reports ``metadata.iso`` as its sandbox isolation."""
    return _scores(record, "iso")


@evaluator(name="test/iso-lint", version="1.0.0", output="passed")
def iso_lint(record: Record) -> Score:
    """Like iso-exec, reporting ``metadata.lint_iso``."""
    return _scores(record, "lint_iso")


def registry() -> Registry:
    """The built-ins plus the two stand-ins (for Run mode and the server, which resolve refs)."""
    reg = builtin_registry(entry_points=False)
    reg.register(iso_exec)
    reg.register(iso_lint)
    return reg


def row(i: int, iso: Any = None, lint_iso: Any = None, *, ok: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"ok": ok}
    if iso is not None:
        meta["iso"] = iso
    if lint_iso is not None:
        meta["lint_iso"] = lint_iso
    return {"id": f"r{i}", "output": f"out {i}", "reference": f"out {i}", "metadata": meta}


def records(rows: list[dict[str, Any]]) -> list[Record]:
    return [
        Record(id=r["id"], output=Content.of_text(r["output"]), metadata=r["metadata"])
        for r in rows
    ]


def _result(evaluator_name: str, *isos: Any, outcome: Outcome = Outcome.SCORED) -> Any:
    scores = [
        Score(name=f"m{i}", passed=True, metadata={} if iso is None else {"isolation": iso})
        for i, iso in enumerate(isos)
    ]
    return EvaluationResult("r0", evaluator_name, f"test/{evaluator_name}@1", outcome, scores)


# -- reading one report ------------------------------------------------------------------------


def test_level_names_and_ranks_are_the_sandbox_ladder() -> None:
    assert {level.name.lower(): int(level) for level in Level} == LEVELS


def test_a_sandbox_isolation_dict_reads_back_as_itself() -> None:
    got = parse_isolation(BWRAP_PARTIAL)
    assert got == ReportedIsolation("bwrap", 2, "partial", ("cgroup-memory",))
    assert parse_isolation(FIRECRACKER) == ReportedIsolation("firecracker", 4, "full", ())


def test_an_unreadable_report_counts_as_none_and_partial() -> None:
    # A report evalsi cannot read must never let a level gate pass.
    for bad in ("namespaced", {"driver": "x", "level": "bogus"}, {"level": 2}, ["vm"]):
        got = parse_isolation(bad)
        assert (got.level, got.enforcement) == (0, "partial"), bad
        assert got.missing, bad
    odd = parse_isolation({"driver": "bwrap", "level": "vm", "enforcement": "mostly"})
    assert (odd.level, odd.enforcement) == (4, "partial")
    assert odd.missing == ("unknown enforcement 'mostly'",)
    claims_full = parse_isolation({"driver": "bwrap", "level": "namespaced", "missing": ["pids"]})
    assert claims_full == ReportedIsolation("bwrap", 2, "partial", ("pids",))


def test_weakest_keeps_the_lower_level_its_driver_and_every_gap() -> None:
    a = parse_isolation(BWRAP_PARTIAL)
    b = parse_isolation(FIRECRACKER)
    c = parse_isolation(LANDLOCK)
    assert weakest(b, a) == a  # namespaced < vm, and a already holds all that is missing
    both = weakest(weakest(a, b), c)
    assert both == ReportedIsolation("landlock", 1, "partial", ("cgroup-memory", "cgroup-pids"))
    # A full report below a partial one: the level's driver, but the enforcement stays partial.
    low_full = ReportedIsolation("landlock", 1)
    assert weakest(a, low_full) == ReportedIsolation("landlock", 1, "partial", ("cgroup-memory",))


# -- per record --------------------------------------------------------------------------------


def test_record_provenance_is_the_weakest_across_evaluators_scores_and_trials() -> None:
    results = [
        _result("iso-exec", BWRAP, None),  # one score sandboxed, one not
        _result("iso-lint", FIRECRACKER),
        _result("iso-exec", LANDLOCK),  # another trial
        _result("other", None),  # nothing sandboxed
    ]
    assert record_isolation(results) == IsolationReport(
        level="confined",
        driver="landlock",
        details={"enforcement": "partial", "missing": "cgroup-pids"},
    )
    assert record_isolation(results[:2]) == IsolationReport(
        level="namespaced", driver="bwrap", details={"enforcement": "full"}
    )


def test_record_provenance_ignores_unscored_results_and_is_none_without_sandbox() -> None:
    assert record_isolation([_result("other", None)]) is None
    assert record_isolation([]) is None
    skipped = _result("iso-exec", LANDLOCK, outcome=Outcome.SKIPPED)
    assert record_isolation([skipped, _result("a", FIRECRACKER)]) == IsolationReport(
        level="vm", driver="firecracker", details={"enforcement": "full"}
    )


def test_evaluate_gives_each_sandboxed_record_its_provenance_from_the_store() -> None:
    rows = [
        row(0, BWRAP, FIRECRACKER),
        row(1, FIRECRACKER, LANDLOCK),
        row(2),  # nothing sandboxed: no provenance isolation
        row(3, BWRAP_PARTIAL, None),
    ]
    result = evalsi.evaluate(records(rows), [iso_exec, iso_lint], store=":memory:")
    got = [(r.seq, r.record_id, r.isolation) for r in result.iter_record_isolation()]
    assert got == [
        (0, "r0", IsolationReport("namespaced", "bwrap", {"enforcement": "full"})),
        (
            1,
            "r1",
            IsolationReport(
                "confined", "landlock", {"enforcement": "partial", "missing": "cgroup-pids"}
            ),
        ),
        (
            3,
            "r3",
            IsolationReport(
                "namespaced", "bwrap", {"enforcement": "partial", "missing": "cgroup-memory"}
            ),
        ),
    ]


# -- per evaluator (the Aggregator) ------------------------------------------------------------


def test_the_aggregator_summarises_each_sandboxed_evaluator() -> None:
    rows = [row(0, BWRAP), row(1, LANDLOCK), row(2, FIRECRACKER), row(3, BWRAP_PARTIAL), row(4)]
    result = evalsi.evaluate(records(rows), [iso_exec, "exact-match"], store=":memory:")
    assert result.isolation == [
        IsolationSummary(
            evaluator="iso-exec",
            level="confined",
            driver="landlock",
            drivers=("bwrap", "landlock", "firecracker"),
            enforcement="partial",
            missing=("cgroup-pids", "cgroup-memory"),
            sandboxed=4,
            partial=2,
            unreported=1,  # r4 was scored without saying how it ran
        )
    ]


def test_the_aggregator_reports_nothing_for_unsandboxed_evaluators() -> None:
    aggregator = Aggregator([("exact-match", ())], cluster_by=None)
    assert aggregator.isolation() == []
    result = evalsi.evaluate(records([row(0), row(1)]), [iso_exec], store=":memory:")
    assert result.isolation == []
    assert result.to_dict()["isolation"] == []


def test_summary_dict_round_trips() -> None:
    rows = [row(0, BWRAP_PARTIAL), row(1, FIRECRACKER)]
    result = evalsi.evaluate(records(rows), [iso_exec], store=":memory:")
    (summary,) = result.isolation
    assert IsolationSummary.from_dict(summary.to_dict()) == summary
    assert summary.to_dict() == {
        "evaluator": "iso-exec",
        "level": "namespaced",
        "driver": "bwrap",
        "drivers": ["bwrap", "firecracker"],
        "enforcement": "partial",
        "missing": ["cgroup-memory"],
        "sandboxed": 2,
        "partial": 1,
        "unreported": 0,
    }

"""Review files in process: a Score run and an agent Run exported, filled in by reviewers,
imported; evidence changed in the store, items edited in the file, reviews that say nothing.

The flows that touch the store run on SQLite and on PostgreSQL. Every refusal is checked next
to an item of the same file that is accepted, so a test cannot pass by refusing everything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

import evalsi
from evalsi.connectors import TargetOutput
from evalsi.core import Check, Content, NotFoundError, Step, ToolCall, Trajectory, UserError
from evalsi.evidence import ImportResult, export_review, fingerprint, import_review, list_reviews
from evalsi.evidence._review import FORMAT
from evalsi.runs._execute import execute_run
from evalsi.runs._grade import grade_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

ROWS = [
    {"id": "q1", "input": "capital of France?", "output": "Paris", "reference": "Paris"},
    {"id": "q2", "input": "capital of Japan?", "output": "Tokyo.", "reference": "Tokyo"},
    {"id": "q3", "input": "2 + 2?", "output": "4", "reference": "4"},
    {"id": "q4", "input": "largest ocean?", "output": "Pacific", "reference": "Atlantic"},
]

# scenario -> (answer, whether the environment's end-state check passes)
AGENT = {"s1": ("done", True), "s2": ("done", False), "s3": ("no", True)}


def agent(question: str) -> TargetOutput:
    """An agent that looks the order up, answers, and leaves the end state the table says."""
    answer, clean = AGENT[question]
    steps = [
        Step(
            "tool_call",
            "lookup",
            tool_call=ToolCall("lookup", {"order": question}),
            output={"rows": 1.0, "status": "open"},
        ),
        Step("llm_call", "model", output=answer),
    ]
    check = Check("end-state", clean, "" if clean else "the order is still open")
    trajectory = Trajectory(steps, stop_reason="final_answer", checks=[check])
    return TargetOutput(output=Content.of_text(answer), trajectory=trajectory)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    db = SqlStore.open(store_url)
    yield db
    db.close()


def _data(tmp: Path, rows: list[dict[str, Any]], name: str = "data.jsonl") -> Path:
    path = tmp / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _score_run(store: SqlStore, tmp: Path) -> str:
    result = evalsi.evaluate(
        str(_data(tmp, ROWS)),
        ["exact-match", "contains"],
        params={"contains": {"values": ["a"]}},
        store=store,
        registry=BUILTINS,
    )
    return result.run_id


def _agent_run(store: SqlStore, tmp: Path) -> str:
    rows = [{"id": sid, "input": sid, "reference": "done"} for sid in AGENT]
    spec = RunSpec(
        name="agent",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(_data(tmp, rows, "scenarios.jsonl"))),
        evaluators=(EvaluatorEntry(ref="exact-match"), EvaluatorEntry(ref="task-success")),
        trials=2,
        max_concurrency=1,
    )
    return asyncio.run(execute_run(spec, store=store, registry=BUILTINS)).run_id


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *items = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return header, items


def _write(path: Path, header: dict[str, Any], items: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in [header, *items]))


def _fill(
    item: dict[str, Any],
    approval: str | None = "approved",
    rationale: str = "checked against the source",
    reviewer: str = "ann",
    verdict: Any = None,
) -> dict[str, Any]:
    item["review"] = {
        "approval": approval,
        "verdict": verdict,
        "rationale": rationale,
        "reviewer": reviewer,
    }
    return item


def _results(store: SqlStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        query = "SELECT * FROM results ORDER BY run, seq, trial, evaluator"
        return [tuple(row) for row in conn.exec_driver_sql(query)]


def _reasons(result: ImportResult) -> dict[str, str]:
    return {r.item: r.reason for r in result.refused}


# -- export ------------------------------------------------------------------------------------
def test_a_score_run_exports_one_item_per_result_with_its_evidence(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _score_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    assert export_review(store, run, out) == 8
    header, items = _read(out)
    assert (header["format"], header["version"], header["run_id"]) == (FORMAT, 1, run)
    assert header["items"] == 8 == len(items)  # the count written last, into the header
    first = items[0]
    assert first["item"] == f"{run}:0:0:exact-match"
    assert (first["seq"], first["trial"], first["record_id"]) == (0, 0, "q1")
    assert first["evaluator_spec"]["ref"] == "builtin/exact-match@1.0.0"
    assert first["evidence"] == {
        "input": "capital of France?",
        "output": "Paris",
        "reference": "Paris",
    }
    assert first["automatic"]["outcome"] == "scored"
    assert first["automatic"]["scores"][0]["passed"] is True
    assert first["review"] == {"approval": None, "verdict": None, "rationale": "", "reviewer": ""}
    assert all(i["fingerprint"] == fingerprint(i) for i in items)
    assert len({i["fingerprint"] for i in items}) == 8
    assert [(i["seq"], i["evaluator"]) for i in items[:3]] == [
        (0, "exact-match"),
        (0, "contains"),
        (1, "exact-match"),
    ]


def test_export_selects_evaluators_failures_and_a_limit(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _score_run(store, tmp_path)
        only = tmp_path / "em.jsonl"
        assert export_review(store, run, only, evaluators=["exact-match"]) == 4
        assert {i["evaluator"] for i in _read(only)[1]} == {"exact-match"}
        failing = tmp_path / "failing.jsonl"
        # exact-match fails q2 and q4; contains("a") fails q2 ("Tokyo."), q3 ("4")
        assert export_review(store, run, failing, only_failing=True) == 4
        got = [(i["record_id"], i["evaluator"]) for i in _read(failing)[1]]
        assert got == [
            ("q2", "exact-match"),
            ("q2", "contains"),
            ("q3", "contains"),
            ("q4", "exact-match"),
        ]
        assert all(i["automatic"]["scores"][0]["passed"] is False for i in _read(failing)[1])
        limited = tmp_path / "limited.jsonl"
        assert export_review(store, "latest", limited, only_failing=True, limit=3) == 3
        header, items = _read(limited)
        assert header["items"] == 3 == len(items)
        assert header["selection"] == {"evaluators": None, "only_failing": True, "limit": 3}
        assert export_review(store, run, tmp_path / "none.jsonl", limit=0) == 0
        with pytest.raises(UserError, match="has no evaluator 'nope'"):
            export_review(store, run, tmp_path / "x.jsonl", evaluators=["nope"])
        with pytest.raises(UserError, match="exists; a review file is never overwritten"):
            export_review(store, run, only)
        with pytest.raises(NotFoundError, match="no run 'missing'"):
            export_review(store, "missing", tmp_path / "y.jsonl")
        assert not (tmp_path / "x.jsonl").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    finally:
        store.close()


def test_a_running_run_is_not_exported(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = store.create_run(kind="score", spec={"evaluators": []}).id
        with pytest.raises(UserError, match="is running; its results are still changing"):
            export_review(store, run, tmp_path / "r.jsonl")
    finally:
        store.close()


def test_an_agent_run_exports_its_trajectory_tool_calls_and_checks(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _agent_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    assert export_review(store, run, out) == 12  # 3 scenarios x 2 trials x 2 evaluators
    _, items = _read(out)
    s2 = next(i for i in items if i["record_id"] == "s2" and i["evaluator"] == "task-success")
    assert s2["trial"] == 0
    assert s2["evidence"]["output"] == "done"
    assert s2["evidence"]["tool_calls"] == [
        {
            "step": 0,
            "tool": "lookup",
            "arguments": {"order": "s2"},
            "result": {"rows": 1, "status": "open"},  # 1.0 shown as 1, as every surface does
        }
    ]
    assert s2["evidence"]["checks"] == [
        {"name": "end-state", "passed": False, "detail": "the order is still open"}
    ]
    assert s2["evidence"]["stop_reason"] == "final_answer"
    assert s2["automatic"]["scores"][0]["passed"] is False
    assert {i["trial"] for i in items} == {0, 1}


# -- import ------------------------------------------------------------------------------------
def test_filled_reviews_are_stored_apart_and_results_are_untouched(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _score_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out)
    header, items = _read(out)
    _fill(items[2], "approved", "Tokyo. is Tokyo")  # q2 exact-match failed
    _fill(items[3], "rejected", "the answer has no a... it does", verdict={"passed": True})
    _write(out, header, items)
    before = _results(store)
    result = import_review(store, out)
    assert (len(result.accepted), result.refused, result.skipped) == (2, (), 6)
    assert result.exit_code == 0
    assert _results(store) == before  # a review never changes an automatic score
    stored = list_reviews(store, run)
    assert [(r.record_id, r.evaluator_name, r.approval) for r in stored] == [
        ("q2", "exact-match", "approved"),
        ("q2", "contains", "rejected"),
    ]
    assert stored[1].verdict == {"passed": True}
    assert stored[0].fingerprint == items[2]["fingerprint"]
    assert stored[0].reviewer == "ann"
    assert list_reviews(store, "latest") == stored


def test_an_agent_run_s_reviews_are_stored(store: SqlStore, tmp_path: Path) -> None:
    run = _agent_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out, evaluators=["task-success"])
    header, items = _read(out)
    for item in items:
        _fill(item, "approved", "the check reads the shop file", reviewer="ops")
    _write(out, header, items)
    result = import_review(store, out)
    assert (len(result.accepted), len(result.refused)) == (6, 0)
    assert [(r.record_id, r.trial) for r in list_reviews(store, run)] == [
        ("s1", 0),
        ("s1", 1),
        ("s2", 0),
        ("s2", 1),
        ("s3", 0),
        ("s3", 1),
    ]


def test_a_grade_run_is_reviewed_over_the_outputs_it_copied(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        source = _agent_run(store, tmp_path)
        graded = asyncio.run(grade_run(store, source, ["contains"], registry=BUILTINS,
                                       params={"contains": {"values": ["done"]}}))  # fmt: skip
        out = tmp_path / "review.jsonl"
        assert export_review(store, graded.run_id, out) == 6
        header, items = _read(out)
        assert items[0]["evidence"]["tool_calls"][0]["tool"] == "lookup"
        _write(out, header, [_fill(items[0])])
        assert len(import_review(store, out).accepted) == 1
    finally:
        store.close()


def test_an_item_whose_output_changed_in_the_store_is_refused(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _agent_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out, evaluators=["exact-match"])
    header, items = _read(out)
    for item in items:
        _fill(item)
    _write(out, header, items)
    with store.engine.begin() as conn:  # the target's stored answer for s1, trial 0, rewritten
        conn.execute(
            sa.text(
                "UPDATE outputs SET output = :o WHERE seq = 0 AND trial = 0 "
                "AND run = (SELECT pk FROM runs WHERE id = :r)"
            ),
            {"o": '"rewritten"', "r": run},
        )
    result = import_review(store, out)
    assert result.exit_code == 1
    assert _reasons(result) == {
        f"{run}:0:0:exact-match": "the evidence changed since export (evidence.output): "
        "review it again from a new export"
    }
    assert result.refused[0].line == 2
    assert len(result.accepted) == 5  # the other items of the file are stored
    assert (0, 0) not in {(r.seq, r.trial) for r in list_reviews(store, run)}


def test_an_item_whose_automatic_verdict_changed_in_the_store_is_refused(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _score_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out, evaluators=["exact-match"])
    header, items = _read(out)
    _write(out, header, [_fill(i) for i in items])
    with store.engine.begin() as conn:  # q4's exact-match result flipped to a pass
        conn.execute(
            sa.text(
                "UPDATE results SET value = 1.0 WHERE seq = 3 AND evaluator = 0 "
                "AND run = (SELECT pk FROM runs WHERE id = :r)"
            ),
            {"r": run},
        )
    result = import_review(store, out)
    assert list(_reasons(result).values()) == [
        "the evidence changed since export (automatic): review it again from a new export"
    ]
    assert len(result.accepted) == 3


def test_a_review_file_edited_beyond_its_reviews_is_refused(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _score_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out)
    header, items = _read(out)
    for item in items[:4]:
        _fill(item)
    items[0]["evidence"]["output"] = "Lyon"  # the evidence the reviewer saw, not the store's
    items[1]["fingerprint"] = "sha256:" + "0" * 64  # a fingerprint made up to match
    items[2]["automatic"]["scores"][0]["passed"] = True
    _write(out, header, items)
    result = import_review(store, out)
    edited = "edited in the review file: its fingerprint no longer matches its evidence"
    assert sorted(r.line for r in result.refused) == [2, 3, 4]
    assert all(r.reason.startswith(edited) for r in result.refused)
    assert [r.record_id for r in result.accepted] == ["q2"]  # items[3], untouched


@pytest.mark.parametrize(
    ("review", "reason"),
    [
        ({"approval": "approved", "rationale": "", "reviewer": "ann"}, "approved without a "
         "rationale: say why in review.rationale"),
        ({"approval": "rejected", "rationale": "wrong", "reviewer": " "}, "rejected without a "
         "reviewer: name yourself in review.reviewer"),
        ({"approval": "yes", "rationale": "x", "reviewer": "ann"}, "review.approval is 'yes': "
         'give "approved", "rejected" or null'),
        ({"approval": None, "rationale": "looks fine", "reviewer": "ann"}, "a rationale or "
         'verdict but no approval: set "approved" or "rejected"'),
        ({"approval": "approved", "rationale": 3, "reviewer": "ann"}, "review.rationale and "
         "review.reviewer must be text"),
    ],
)  # fmt: skip
def test_a_review_that_does_not_say_who_and_why_is_refused(
    tmp_path: Path, review: dict[str, Any], reason: str
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _score_run(store, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(store, run, out)
        header, items = _read(out)
        items[0]["review"] = {"verdict": None, **review}
        _fill(items[1])
        _write(out, header, items)
        result = import_review(store, out)
        assert [(r.line, r.reason) for r in result.refused] == [(2, reason)]
        assert (len(result.accepted), result.skipped) == (1, 6)
        assert len(list_reviews(store, run)) == 1
    finally:
        store.close()


def test_reimporting_is_idempotent_and_two_reviewers_are_both_kept(
    store: SqlStore, tmp_path: Path
) -> None:
    run = _score_run(store, tmp_path)
    out = tmp_path / "review.jsonl"
    export_review(store, run, out)
    header, items = _read(out)
    ann = [_fill(dict(i), "approved", "right", reviewer="ann") for i in items[:2]]
    _write(out, header, ann)
    import_review(store, out)
    first = [(r.seq, r.evaluator, r.reviewer, r.rationale) for r in list_reviews(store, run)]
    import_review(store, out)
    again = list_reviews(store, run)
    assert [(r.seq, r.evaluator, r.reviewer, r.rationale) for r in again] == first
    assert len(again) == 2
    bob = tmp_path / "bob.jsonl"
    _write(bob, header, [_fill(dict(items[0]), "rejected", "too strict", reviewer="bob")])
    assert len(import_review(store, bob).accepted) == 1
    ann[0]["review"]["rationale"] = "right, on a second look"
    _write(out, header, ann)
    import_review(store, out)  # ann's review of the same result is replaced, bob's stays
    got = [(r.seq, r.evaluator, r.reviewer, r.rationale) for r in list_reviews(store, run)]
    assert got == [
        (0, 0, "ann", "right, on a second look"),
        (0, 0, "bob", "too strict"),
        (0, 1, "ann", "right"),
    ]


def test_one_reviewer_twice_in_one_file_is_refused_the_second_time(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _score_run(store, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(store, run, out)
        header, items = _read(out)
        _write(out, header, [_fill(dict(items[0])), _fill(dict(items[0]), "rejected")])
        result = import_review(store, out)
        assert [(r.line, r.reason) for r in result.refused] == [
            (3, "reviewed twice by 'ann' in this file (also line 2)")
        ]
        assert [r.approval for r in list_reviews(store, run)] == ["approved"]
    finally:
        store.close()


def test_a_file_rewritten_by_another_json_tool_still_imports(tmp_path: Path) -> None:
    """Whole numbers written as 1 instead of 1.0, keys reordered, ASCII escapes: the same
    values, the same fingerprint."""
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _agent_run(store, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(store, run, out, evaluators=["task-success"])
        header, items = _read(out)
        item = _fill(items[0], rationale="vérifié")
        assert item["automatic"]["scores"][1] == {"name": "checks-passed", "number": 1}
        item["automatic"]["scores"][1]["number"] = 1.0
        lines = [json.dumps(v, sort_keys=True, indent=None) for v in (header, item)]
        out.write_text("\n".join(lines) + "\n\n")
        result = import_review(store, out)
        assert (len(result.accepted), result.refused) == (1, ())
        assert list_reviews(store, run)[0].rationale == "vérifié"
    finally:
        store.close()


def test_when_the_dataset_changed_every_filled_item_is_refused(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _score_run(store, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(store, run, out)
        header, items = _read(out)
        _write(out, header, [_fill(items[0]), _fill(items[5])])
        data = tmp_path / "data.jsonl"
        data.write_bytes(data.read_bytes().replace(b'"Pacific"', b'"Atlantic"'))
        result = import_review(store, out)
        assert len(result.refused) == 2
        assert all(
            r.reason.startswith("its evidence cannot be read again: the dataset")
            and "changed since run" in r.reason
            for r in result.refused
        )
        assert result.accepted == ()
        assert list_reviews(store, run) == []
    finally:
        store.close()


def test_bad_input_stores_nothing_and_names_the_line(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = _score_run(store, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(store, run, out)
        header, items = _read(out)
        _write(out, header, [_fill(items[0]), _fill(items[1])])
        good = out.read_bytes()
        out.write_bytes(good + b'{"item": "cut short\n')
        with pytest.raises(UserError, match=r"review\.jsonl:4: not valid JSON \(.*nothing was"):
            import_review(store, out)
        out.write_bytes(good + b'{"item": "x"}\n')
        with pytest.raises(UserError, match=r"review\.jsonl:4: the review item has no 'run_id'"):
            import_review(store, out)
        assert list_reviews(store, run) == []  # the good lines before it were not stored
        out.write_bytes(b'{"format": "something-else"}\n')
        with pytest.raises(UserError, match="not an evalsi review file"):
            import_review(store, out)
        out.write_bytes(b"")
        with pytest.raises(UserError, match="not an evalsi review file"):
            import_review(store, out)
        out.write_bytes(orjson.dumps({**header, "version": 2}) + b"\n")
        with pytest.raises(UserError, match="review format version 2; this evalsi reads"):
            import_review(store, out)
        with pytest.raises(UserError, match="cannot read the review file"):
            import_review(store, tmp_path / "absent.jsonl")
    finally:
        store.close()


def test_a_file_of_an_unknown_run_is_refused_whole(tmp_path: Path) -> None:
    first = SqlStore.open(tmp_path / "a.db")
    try:
        run = _score_run(first, tmp_path)
        out = tmp_path / "review.jsonl"
        export_review(first, run, out)
        header, items = _read(out)
        _write(out, header, [_fill(items[0])])
    finally:
        first.close()
    other = SqlStore.open(tmp_path / "b.db")
    try:
        with pytest.raises(NotFoundError, match=f"no run '{run}' in this store"):
            import_review(other, out)
        _score_run(other, tmp_path)
        prefix = run[:8]  # a prefix that matches another store's run is still not this run
        header["run_id"] = prefix
        _write(out, header, [items[0]])
        with pytest.raises(UserError, match=f"run {prefix} is not in this store"):
            import_review(other, out)
    finally:
        other.close()

"""`evalsi review export | import | list` as a reviewer uses them: export a run's failures,
fill in approvals, import them (exit 0), see them listed; an edited item refused (exit 1) while
the rest is stored; a damaged file refused whole (exit 2)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

ROWS = [
    {"id": "q1", "input": "capital of France?", "output": "Paris", "reference": "Paris"},
    {"id": "q2", "input": "capital of Japan?", "output": "Tokyo.", "reference": "Tokyo"},
    {"id": "q3", "input": "largest ocean?", "output": "Pacific", "reference": "Atlantic"},
]


def _items(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *items = [json.loads(line) for line in path.read_text().splitlines()]
    return header, items


def _write(path: Path, header: dict[str, Any], items: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(v) + "\n" for v in [header, *items]))


def _results(tmp: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{tmp / '.evalsi' / 'evalsi.db'}?mode=ro", uri=True) as conn:
        return list(conn.execute("SELECT * FROM results ORDER BY run, seq, trial, evaluator"))


def test_export_fill_import_list(cli, write_jsonl, json_out, tmp_path) -> None:
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    run = json_out(cli("eval", "--data", "data.jsonl", "--evaluators", "exact-match",
                       "--format", "json"))["run_id"]  # fmt: skip
    proc = cli("review", "export", "latest", "-o", "review.jsonl", "--failing")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "Review file written to: review.jsonl",
        f"Run ID: {run}",
        "Items: 2",
    ]
    assert "evalsi review import review.jsonl" in proc.stderr
    header, items = _items(tmp_path / "review.jsonl")
    assert (header["run_id"], header["items"]) == (run, 2)
    assert [i["record_id"] for i in items] == ["q2", "q3"]
    items[0]["review"] = {"approval": "rejected", "verdict": {"passed": True},
                          "rationale": "Tokyo. is Tokyo", "reviewer": "ann"}  # fmt: skip
    items[1]["review"] = {"approval": "approved", "verdict": None,
                          "rationale": "the Pacific is larger", "reviewer": "ann"}  # fmt: skip
    _write(tmp_path / "review.jsonl", header, items)
    before = _results(tmp_path)
    proc = cli("review", "import", "review.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"Run ID: {run}",
        "Accepted: 2",
        "Refused: 0",
        "Skipped (no approval): 0",
    ]
    assert _results(tmp_path) == before
    listed = json_out(cli("review", "list", run[:10], "--format", "json"))
    assert [(r["record_id"], r["approval"], r["verdict"]) for r in listed["reviews"]] == [
        ("q2", "rejected", {"passed": True}),
        ("q3", "approved", None),
    ]
    table = cli("review", "list", "latest")
    assert table.returncode == 0, table.stderr
    assert "Tokyo. is Tokyo" in table.stdout
    assert table.stdout.splitlines()[0] == f"reviews of run {run}: 2"


def test_an_edited_item_is_refused_and_the_rest_stored(cli, write_jsonl, json_out, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    json_out(cli("eval", "--data", "data.jsonl", "--evaluators", "exact-match", "--format", "json"))
    assert cli("review", "export", "latest", "-o", "r.jsonl").returncode == 0
    header, items = _items(tmp_path / "r.jsonl")
    for item in items:
        item["review"] = {"approval": "approved", "rationale": "ok", "reviewer": "bob"}
    items[2]["evidence"]["output"] = "Atlantic"
    _write(tmp_path / "r.jsonl", header, items)
    proc = cli("review", "import", "r.jsonl")
    assert proc.returncode == 1, proc.stderr
    assert "Accepted: 2" in proc.stdout
    refused = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 1
    assert refused[0].startswith("REFUSED line 4 (")
    assert "edited in the review file" in refused[0]
    out = json.loads(cli("review", "import", "r.jsonl", "--format", "json").stdout)
    assert [r["line"] for r in out["refused"]] == [4]
    listed = json_out(cli("review", "list", "latest", "--format", "json"))
    assert [r["record_id"] for r in listed["reviews"]] == ["q1", "q2"]


def test_bad_input_is_exit_2(cli, write_jsonl, json_out, user_error, tmp_path) -> None:
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    json_out(cli("eval", "--data", "data.jsonl", "--evaluators", "exact-match", "--format", "json"))
    user_error(cli("review", "export", "nope", "-o", "r.jsonl"), "no run 'nope'")
    user_error(
        cli("review", "export", "latest", "-o", "r.jsonl", "--evaluator", "contains"),
        "has no evaluator 'contains'",
    )
    assert cli("review", "export", "latest", "-o", "r.jsonl").returncode == 0
    user_error(cli("review", "export", "latest", "-o", "r.jsonl"), "r.jsonl exists")
    header, items = _items(tmp_path / "r.jsonl")
    items[0]["review"] = {"approval": "approved", "rationale": "ok", "reviewer": "bob"}
    _write(tmp_path / "r.jsonl", header, items)
    with (tmp_path / "r.jsonl").open("a") as f:
        f.write('{"item": \n')
    user_error(cli("review", "import", "r.jsonl"), "r.jsonl:5: not valid JSON")
    listed = json_out(cli("review", "list", "latest", "--format", "json"))
    assert listed["reviews"] == []  # the good line before it was not stored
    (tmp_path / "data.jsonl").rename(tmp_path / "not-a-review.jsonl")
    user_error(cli("review", "import", "not-a-review.jsonl"), "not an evalsi review file")
    user_error(cli("review", "import", "r.jsonl", "--store", "none.db"), "no result store")


def test_help_teaches_the_workflow(cli) -> None:
    top = cli("review", "--help")
    assert top.returncode == 0
    assert "evalsi review export RUN -o FILE" in top.stdout
    export = cli("review", "export", "--help")
    assert '"approval": null' in export.stdout
    assert "--failing" in export.stdout
    imported = cli("review", "import", "--help")
    assert "Exit codes: 0 nothing refused; 1 some item was refused" in imported.stdout

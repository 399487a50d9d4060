"""The result store through the CLI: `runs list`, `runs show ID|prefix|latest`, `--store`, and
the default `.evalsi/evalsi.db` under the working directory."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

ROWS = [
    {"id": "a", "output": "x", "reference": "x", "usage": {"latency_ms": 10}},
    {"id": "b", "output": "x", "reference": "y", "usage": {"latency_ms": 20}},
    {"id": "c", "output": "y", "reference": "y", "usage": {"latency_ms": 40}},
]


def _eval(cli, json_out, *extra: str) -> dict:
    return json_out(
        cli(
            "eval",
            "--data",
            "data.jsonl",
            "--evaluators",
            "exact-match,latency",
            "--format",
            "json",
            *extra,
        )
    )


def test_default_store_is_under_the_working_directory(cli, write_jsonl, json_out, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    out = _eval(cli, json_out)
    db = tmp_path / ".evalsi" / "evalsi.db"
    assert db.is_file()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM runs")]
        (n,) = conn.execute("SELECT count(*) FROM results").fetchone()
    assert ids == [out["run_id"]]
    assert n == 6  # 3 records x 2 evaluators
    listed = json_out(cli("runs", "list", "--format", "json"))
    assert [r["run_id"] for r in listed["runs"]] == [out["run_id"]]


def test_store_option_puts_the_database_there(cli, write_jsonl, json_out, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    out = _eval(cli, json_out, "--store", "nested/dir/results.db")
    assert (tmp_path / "nested" / "dir" / "results.db").is_file()
    assert not (tmp_path / ".evalsi").exists()
    listed = json_out(cli("runs", "list", "--format", "json", "--store", "nested/dir/results.db"))
    assert [r["run_id"] for r in listed["runs"]] == [out["run_id"]]
    # The default store knows nothing about it (and `runs list` there is simply empty).
    empty = json_out(cli("runs", "list", "--format", "json"))
    assert empty["runs"] == []


def test_runs_list_and_show_return_the_stored_run(cli, write_jsonl, json_out, user_error, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    first = _eval(cli, json_out, "--store", "s.db", "--name", "first")
    second = _eval(cli, json_out, "--store", "s.db", "--name", "second")
    a, b = first["run_id"], second["run_id"]
    assert a != b

    listed = json_out(cli("runs", "list", "--store", "s.db", "--format", "json"))["runs"]
    assert [r["run_id"] for r in listed] == [b, a]  # newest first
    entry = listed[1]
    assert entry["status"] == "done"
    assert entry["records"] == 3
    assert entry["kind"] == "score"
    assert entry["name"] == "first"
    assert entry["evaluators"] == ["exact-match", "latency"]

    shown = json_out(cli("runs", "show", a, "--store", "s.db", "--format", "json"))
    assert shown["run_id"] == a
    assert shown["status"] == "done"
    assert shown["records"] == 3
    assert shown["metrics"] == first["metrics"]  # exactly what eval reported
    assert shown["dataset"] == first["dataset"]
    assert shown["manifest"]["dataset"]["version"] == first["dataset"]["version"]
    # The failures list names the record that failed exact-match.
    assert [(f["record_id"], f["evaluator"]) for f in shown["failures"]] == [("b", "exact-match")]

    latest = json_out(cli("runs", "show", "latest", "--store", "s.db", "--format", "json"))
    assert latest["run_id"] == b
    assert latest["metrics"] == second["metrics"]

    # The shortest prefix of `a` that is not a prefix of `b` is unique.
    k = next(i for i in range(1, len(a) + 1) if not b.startswith(a[:i]))
    by_prefix = json_out(cli("runs", "show", a[:k], "--store", "s.db", "--format", "json"))
    assert by_prefix["run_id"] == a
    # A prefix both share is ambiguous: exit 2, no traceback.
    common = a[: k - 1] if k > 1 else ""
    if common:
        user_error(cli("runs", "show", common, "--store", "s.db"), "ambiguous")

    table = cli("runs", "show", a, "--store", "s.db")
    assert table.returncode == 0, table.stderr
    assert a in table.stdout
    assert "exact-match" in table.stdout
    assert "latency" in table.stdout
    listing = cli("runs", "list", "--store", "s.db")
    assert listing.returncode == 0, listing.stderr
    assert a in listing.stdout
    assert b in listing.stdout


def test_store_written_by_the_cli_is_the_one_a_later_process_reads(
    cli, write_jsonl, json_out, tmp_path
):
    """Values survive the store: what `runs show` prints equals a fresh process's eval JSON."""
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    out = _eval(cli, json_out, "--store", "s.db")
    shown = json_out(cli("runs", "show", out["run_id"][:16], "--store", "s.db", "--format", "json"))
    em = next(m for m in shown["metrics"] if m["evaluator"] == "exact-match")
    assert (em["n"], em["mean"]) == (3, 2 / 3)
    lat = next(m for m in shown["metrics"] if m["metric"] == "latency")
    assert lat["mean"] == 70 / 3
    assert json.loads(json.dumps(shown))  # plain JSON all the way down
    assert Path(tmp_path / "s.db").stat().st_size > 0

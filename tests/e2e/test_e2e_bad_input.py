"""Bad input through the CLI: exit 2, a short message on stderr naming the place, no traceback,
and nothing on stdout even with ``--format json`` (the CLI's output contract)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

GOOD = {"id": "ok", "output": "a", "reference": "a", "usage": {"latency_ms": 5}}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "good.jsonl").write_text(json.dumps(GOOD) + "\n")
    (tmp_path / "bad.jsonl").write_text(
        '{"output": "a", "reference": "a"}\n'
        '{"output": not json}\n'
        '{"output": "b", "reference": "c"}\n'
    )
    (tmp_path / "field.jsonl").write_text(
        json.dumps(GOOD)
        + "\n"
        + json.dumps({"output": "a", "reference": "a", "usage": {"latency_ms": "fast"}})
        + "\n"
    )
    (tmp_path / "array.jsonl").write_text("[1, 2]\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "adir").mkdir()
    return tmp_path


# (id, eval arguments after --data, strings the message must contain)
CASES = [
    ("malformed-jsonl-line", ["bad.jsonl", "--evaluators", "exact-match"], ["bad.jsonl:2", "JSON"]),
    (
        "row-not-an-object",
        ["array.jsonl", "--evaluators", "exact-match"],
        ["array.jsonl:1", "object"],
    ),
    (
        "missing-file",
        ["missing.jsonl", "--evaluators", "exact-match"],
        ["missing.jsonl", "no such"],
    ),
    ("directory-as-data", ["adir", "--evaluators", "exact-match"], ["adir", "directory"]),
    (
        "unknown-suffix",
        ["notes.txt", "--evaluators", "exact-match"],
        ["notes.txt", ".txt", ".jsonl"],
    ),
    ("unsupported-uri", ["s3://bucket/x.jsonl", "--evaluators", "exact-match"], ["s3://"]),
    (
        "unknown-evaluator-suggests",
        ["good.jsonl", "--evaluators", "exact-mtch"],
        ["exact-mtch", "did you mean exact-match"],
    ),
    (
        "invalid-param-value",
        ["good.jsonl", "--evaluators", "exact-match", "--param", "exact-match.ignore_case=maybe"],
        ["exact-match", "ignore_case", "boolean", "maybe"],
    ),
    (
        "unknown-param",
        ["good.jsonl", "--evaluators", "exact-match", "--param", "exact-match.nope=1"],
        ["exact-match", "unknown param 'nope'", "ignore_case"],
    ),
    (
        "param-without-evaluator",
        ["good.jsonl", "--evaluators", "exact-match", "--param", "ignore_case=true"],
        ["--param", "EVALUATOR.KEY=VALUE"],
    ),
    (
        "param-without-value",
        ["good.jsonl", "--evaluators", "exact-match", "--param", "exact-match.ignore_case"],
        ["--param", "EVALUATOR.KEY=VALUE"],
    ),
    (
        "param-for-evaluator-not-in-run",
        ["good.jsonl", "--evaluators", "exact-match", "--param", "contains.values=x"],
        ["contains", "not in this run"],
    ),
    (
        "unusable-field",
        ["field.jsonl", "--evaluators", "latency"],
        ["field.jsonl:2", "usage.latency_ms", "fast"],
    ),
    ("empty-evaluators", ["good.jsonl", "--evaluators", ""], ["--evaluators"]),
    ("only-commas-evaluators", ["good.jsonl", "--evaluators", " , ,"], ["--evaluators"]),
    (
        "invalid-regex",
        ["good.jsonl", "--evaluators", "regex", "--param", "regex.pattern=(unclosed"],
        ["regex", "pattern", "regular expression"],
    ),
    ("regex-without-pattern", ["good.jsonl", "--evaluators", "regex"], ["regex", "pattern"]),
    (
        "invalid-json-schema",
        ["good.jsonl", "--evaluators", "json-schema", "--param", 'json-schema.schema={"type": 5}'],
        ["json-schema", "schema", "Draft 2020-12"],
    ),
    (
        "json-schema-not-json",
        ["good.jsonl", "--evaluators", "json-schema", "--param", "json-schema.schema=notjson"],
        ["json-schema", "schema", "object"],
    ),
    (
        "store-is-a-directory",
        ["good.jsonl", "--evaluators", "exact-match", "--store", "adir"],
        ["adir", "directory"],
    ),
]


@pytest.mark.parametrize(("args", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_a_message_and_no_traceback(files, cli, user_error, args, needles):
    proc = cli("eval", "--format", "json", "--data", *args)
    user_error(proc, *needles)


def test_bad_jsonl_is_skipped_when_asked(files, cli, json_out):
    proc = cli(
        "eval",
        "--data",
        "bad.jsonl",
        "--evaluators",
        "exact-match",
        "--on-bad-record",
        "skip",
        "--format",
        "json",
    )
    out = json_out(proc)
    assert out["bad_records"] == 1
    assert out["records"] == 2
    (m,) = out["metrics"]
    assert (m["n"], m["mean"]) == (2, 0.5)  # rows 1 (pass) and 3 (fail) were graded
    assert "1 bad record" in proc.stderr
    assert "line 2" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unusable_field_is_skipped_when_asked(files, cli, json_out):
    proc = cli(
        "eval",
        "--data",
        "field.jsonl",
        "--evaluators",
        "latency",
        "--on-bad-record",
        "skip",
        "--format",
        "json",
    )
    out = json_out(proc)
    assert (out["bad_records"], out["records"]) == (1, 1)
    assert "usage.latency_ms" in proc.stderr


def test_bad_line_after_graded_batches_keeps_what_was_recorded(cli, user_error, tmp_path):
    """A malformed row far into the file stops the run, but earlier results stay in the store."""
    with (tmp_path / "late.jsonl").open("w") as f:
        for i in range(5000):
            f.write(json.dumps({"id": str(i), "output": "a", "reference": "a"}) + "\n")
        f.write("{oops\n")
    proc = cli("eval", "--data", "late.jsonl", "--evaluators", "exact-match", "--store", "s.db")
    user_error(proc, "late.jsonl:5001")
    shown = cli("runs", "show", "latest", "--store", "s.db", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert run["status"] == "failed"
    assert "late.jsonl:5001" in run["error"]
    with sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True) as db:
        (kept,) = db.execute("SELECT count(*) FROM results").fetchone()
    assert kept > 0
    assert kept == run["records"]


def test_bad_row_hint_names_the_cli_flag(files, cli, user_error):
    proc = cli("eval", "--data", "bad.jsonl", "--evaluators", "exact-match")
    err = user_error(proc, "bad.jsonl:2")
    assert "--on-bad-record skip" in err


def test_unknown_run_id(cli, user_error, tmp_path):
    (tmp_path / "qa.jsonl").write_text('{"output": "a", "reference": "a"}\n')
    made = cli("eval", "--data", "qa.jsonl", "--evaluators", "exact-match", "--store", "s.db")
    assert made.returncode == 0, made.stderr
    proc = cli("runs", "show", "no-such-run", "--store", "s.db", "--format", "json")
    user_error(proc, "no-such-run", "runs list")


def test_reading_a_store_that_does_not_exist_creates_nothing(cli, user_error, tmp_path):
    proc = cli("runs", "show", "latest", "--store", "missing.db")
    user_error(proc, "no result store at missing.db")
    listed = cli("runs", "list")
    assert listed.returncode == 0
    assert "no runs yet" in listed.stderr
    assert not (tmp_path / "missing.db").exists()
    assert not (tmp_path / ".evalsi").exists()


def test_no_command_and_unknown_option_exit_2_without_traceback(cli):
    none = cli()
    assert none.returncode == 2
    assert "usage" in none.stderr
    bad = cli("eval", "--data", "x.jsonl", "--evaluators", "exact-match", "--format", "yaml")
    assert bad.returncode == 2
    assert "--format" in bad.stderr
    assert "Traceback" not in none.stderr + bad.stderr
    assert bad.stdout == ""

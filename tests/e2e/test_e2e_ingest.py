"""``evalsi ingest`` as a user runs it, against ``evalsi serve`` running as a process: a file
of records and the verdicts another tool gave them becomes a Score run on the server, the
same key again finds it, and `runs show` reads it back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import check_user_error, parse_json_stdout, write_jsonl
from tests.support.server_state import free_port, serve_subprocess

ROWS = [
    {
        "id": f"q{i}",
        "input": f"question {i}",
        "output": f"answer {i}",
        "results": [
            {"evaluator": "judge", "scores": [{"passed": i % 5 != 0, "explanation": "graded"}]},
            {"evaluator": "latency", "scores": [{"name": "ms", "value": 200 + i % 7}]},
        ],
    }
    for i in range(300)
]


def test_ingest_a_file_then_read_it_back(tmp_path: Path, run_evalsi: Callable[..., Any]) -> None:
    write_jsonl(tmp_path / "results.jsonl", ROWS)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve_subprocess("--port", str(port), cwd=tmp_path) as server:
        server.wait_healthy(url)
        args = ("ingest", "results.jsonl", "--server", url, "--key", "nightly-1", "-q")
        first = parse_json_stdout(
            run_evalsi(tmp_path, *args, "--name", "acme", "--tool", "acme", "--format", "json",
                       "--evaluator", "judge=acme/judge@2")
        )  # fmt: skip
        again = run_evalsi(tmp_path, *args, "--name", "acme", "--evaluator", "judge=acme/judge@2")
        shown = parse_json_stdout(
            run_evalsi(tmp_path, "runs", "show", first["run_id"], "--server", url, "--format",
                       "json")
        )  # fmt: skip
        listed = run_evalsi(tmp_path, "runs", "list", "--server", url)
        other = parse_json_stdout(
            run_evalsi(tmp_path, "ingest", "results.jsonl", "--server", url, "-q", "--format",
                       "json")
        )  # fmt: skip
    assert first["run_id"].startswith("ing-")
    assert first["records"] == 300
    judge = next(m for m in first["metrics"] if m["evaluator"] == "judge")
    assert (judge["metric"], judge["n"], judge["mean"]) == ("judge", 300, 240 / 300)
    assert judge["ci_method"] == "wilson"
    latency = next(m for m in first["metrics"] if m["evaluator"] == "latency")
    assert (latency["metric"], latency["n"]) == ("ms", 300)
    assert [(e["name"], e["ref"], e["external"]) for e in first["evaluators"]] == [
        ("judge", "acme/judge@2", True),
        ("latency", "external/latency", True),
    ]
    # The same key again: the same run, told as `evalsi eval` tells a run.
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"run {first['run_id']} · 300 records · dataset sha256:")
    assert "judge" in again.stdout
    assert "0.800" in again.stdout
    # Read back: a Score run marked external, its records kept where the spec says.
    assert (shown["kind"], shown["status"], shown["name"]) == ("score", "done", "acme")
    assert shown["spec"]["external"] == {"client_key": "nightly-1", "source": {"tool": "acme"}}
    assert shown["metrics"] == first["metrics"]
    data = Path(shown["spec"]["data"])
    assert data == tmp_path / ".evalsi" / "ingested" / f"{first['run_id']}.jsonl"
    digest = "sha256:" + hashlib.sha256(data.read_bytes()).hexdigest()
    assert shown["dataset"]["version"] == digest
    assert [json.loads(line)["id"] for line in data.read_text().splitlines()] == [
        f"q{i}" for i in range(300)
    ]
    assert listed.returncode == 0, listed.stderr
    assert first["run_id"] in listed.stdout
    # No key: a new run for the same file.
    assert other["run_id"] != first["run_id"]


def test_what_cannot_be_ingested_is_said(tmp_path: Path, run_evalsi: Callable[..., Any]) -> None:
    write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], {"id": "x", "results": [{"evaluator": "j"}]}])
    check_user_error(
        run_evalsi(tmp_path, "ingest", "bad.jsonl", "--server", "http://127.0.0.1:9"),
        "bad.jsonl:2: results[0].scores: a scored result needs at least one score",
    )
    check_user_error(run_evalsi(tmp_path, "ingest", "bad.jsonl"), "give --server URL")
    check_user_error(
        run_evalsi(tmp_path, "ingest", "bad.jsonl", "--server", "http://127.0.0.1:9",
                   "--evaluator", "judge"),
        "--evaluator 'judge': expected NAME=NAMESPACE/NAME[@VERSION]",
    )  # fmt: skip

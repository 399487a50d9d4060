"""What a run explains about itself reaches ``--server`` results too: ``evalsi eval`` and
``evalsi run`` with ``--server URL`` print the same ``warnings``, failure causes and
``failures`` in ``--format json``, the same ``warning:`` lines, and exit with the same codes as
embedded, against the real server app on loopback; ``runs show --server`` reads them back.

Each case runs the command both ways on the same files and compares what the user sees."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server_state import server_state, serving
from tests.support.stub_llm import Fault, StubLLM

Cli = Callable[..., subprocess.CompletedProcess[str]]
EXPLAINED = ("warnings", "infra_error_causes", "target_error_causes", "failures")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(server_state(tmp_path_factory.mktemp("server"))) as s:
        yield s.url


def _both(cli: Cli, server: str, *args: Any) -> tuple[Any, Any]:
    """The command embedded, then with --server: (process, JSON or None) each."""
    local = cli(*args, "--format", "json", "-q")
    remote = cli(*args, "--format", "json", "-q", "--server", server)
    return local, remote


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in proc.stderr, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("warning:", "  also:"))]


def test_eval_warnings_and_failures_are_the_same_remote(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    rows = [
        '{"id": "a", "output": "Paris", "reference": "Paris"}',
        "not json",
        '{"id": "b", "output": "paris.", "reference": "Paris"}',
        '{"id": "a", "output": "Lyon", "reference": "Paris"}',  # repeats a's id
        '{"id": "c", "output": "Paris", "reference": "Paris", "usage": {"latency_ms": 2500}}',
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(rows) + "\n")
    args = ("eval", "--data", "d.jsonl", "--evaluators", "exact-match,latency",
            "--on-bad-record", "skip", "--param", "latency.max_ms=2000")  # fmt: skip
    local, remote = _both(cli, server, *args)
    assert remote.returncode == local.returncode == 0, remote.stderr
    mine, theirs = _json(local), _json(remote)
    assert set(theirs) == set(mine)  # every key, "failures" included
    assert [w["kind"] for w in mine["warnings"]] == ["bad_records", "duplicate_ids"]
    assert theirs["warnings"] == mine["warnings"]  # named by line in the file, both ways
    assert "id 'a' at line 4" in mine["warnings"][1]["examples"][0]
    assert [(f["record_id"], f["metric"]) for f in mine["failures"]] == [
        ("b", "exact-match"), ("a", "exact-match"), ("c", "latency-within-budget")
    ]  # fmt: skip
    assert theirs["failures"] == mine["failures"]
    assert mine["failures"][2]["detail"] == "latency 2500 ms > budget 2000 ms"
    assert _warning_lines(remote.stderr) == _warning_lines(local.stderr) != []

    # `runs show` lists the same failures (one computation), from the store or the server.
    shown = _json(cli("runs", "show", mine["run_id"], "--format", "json"))
    assert shown["failures"] == mine["failures"]
    assert shown["warnings"] == mine["warnings"]
    remote_show = ("runs", "show", theirs["run_id"], "--server", server)
    shown = _json(cli(*remote_show, "--format", "json", "--failures", "2"))
    assert shown["failures"] == mine["failures"][:2]
    assert shown["warnings"] == mine["warnings"]
    assert _json(cli(*remote_show, "--format", "json", "--failures", "0"))["failures"] == []
    md = cli(*remote_show, "--format", "md")
    assert '| b | exact-match | expected "Paris", got "paris." |' in md.stdout
    assert "warning: skipped 1 bad record(s)" in md.stdout

    # --show-failures N lists as many either way; 0 lists none.
    one = cli(*args, "--format", "json", "-q", "--server", server, "--show-failures", "1")
    assert _json(one)["failures"] == mine["failures"][:1]
    table = cli(*args, "-q", "--server", server)
    assert "failures" in table.stdout
    assert 'expected "Paris", got "paris."' in table.stdout


def test_eval_of_nothing_is_exit_2_the_same_way(cli: Cli, server: str, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "bad.jsonl").write_text("nope\nnot json either\n")
    for name, why in (
        ("empty.jsonl", "empty.jsonl: no records (the file is empty)"),
        ("bad.jsonl", "all 2 record(s) were bad and skipped (first: line 1:"),
    ):
        args = ("eval", "--data", name, "--evaluators", "exact-match", "--on-bad-record", "skip")
        local, remote = _both(cli, server, *args)
        assert local.returncode == remote.returncode == 2, remote.stderr
        assert why in local.stderr
        assert why in remote.stderr
        assert "Traceback" not in remote.stderr
        assert remote.stdout == ""


SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: explain}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{url}", model: stub-echo}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 1
  evaluators:
    - ref: exact-match
"""


def _spec(tmp_path: Path, url: str) -> Path:
    rows = [{"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}" if i % 2 else "x"}
            for i in range(4)]  # fmt: skip
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "run.yaml"
    spec.write_text(SPEC.format(url=url))
    return spec


def test_run_with_failed_calls_explains_itself_the_same_remote(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    with StubLLM() as stub:
        spec = _spec(tmp_path, stub.openai_url)
        stub.schedule(Fault(status=403))  # the first call of each run
        local = cli("run", "-f", spec, "--format", "json", "-q")
        stub.schedule(Fault(status=403))
        remote = cli("run", "-f", spec, "--format", "json", "-q", "--server", server)
    assert remote.returncode == local.returncode == 0, remote.stderr
    mine, theirs = _json(local), _json(remote)
    assert [w["kind"] for w in mine["warnings"]] == ["target_errors"]
    assert mine["target_error_causes"][0]["kind"] == "http_403"
    for key in EXPLAINED:
        assert theirs[key] == mine[key], key
    # s0 errored (its call failed); s2 was answered and failed exact-match.
    assert [(f["record_id"], f["outcome"]) for f in mine["failures"]] == [
        ("s0", "error"), ("s2", "failed")
    ]  # fmt: skip
    assert _warning_lines(remote.stderr) == _warning_lines(local.stderr) != []

    shown = _json(cli("runs", "show", theirs["run_id"], "--format", "json", "--server", server))
    for key in ("warnings", "infra_error_causes", "target_error_causes"):
        assert shown[key] == mine[key], key
    assert [f["record_id"] for f in shown["failures"]] == ["s0", "s2"]


def test_a_run_whose_every_call_fails_is_exit_2_remote_too(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    with StubLLM() as stub:
        spec = _spec(tmp_path, stub.openai_url)
        stub.schedule(*[Fault(status=403)] * 4)
        local = cli("run", "-f", spec, "--format", "json", "-q")
        stub.schedule(*[Fault(status=403)] * 4)
        remote = cli("run", "-f", spec, "--format", "json", "-q", "--server", server)
    assert local.returncode == remote.returncode == 2, remote.stderr
    mine, theirs = _json(local), _json(remote)
    assert theirs["status"] == mine["status"] == "failed"
    assert theirs["stopped_reason"] == mine["stopped_reason"]
    assert "all 4 target calls failed: http_403 (4)" in theirs["stopped_reason"]
    for key in EXPLAINED:
        assert theirs[key] == mine[key], key
    assert "error: run " in remote.stderr
    assert "failed: no task was scored" in remote.stderr

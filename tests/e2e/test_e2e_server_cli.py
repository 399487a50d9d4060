"""The CLI with ``--server URL`` (or ``EVALSI_SERVER``) as a user runs it, against the real
server app on loopback: the same output formats and exit codes as the embedded commands, and
the same metrics, n and intervals for the same ``run.yaml``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import check_user_error, parse_json_stdout, write_jsonl
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import StubLLM

Cli = Callable[..., subprocess.CompletedProcess[str]]
ROWS = [
    {"id": f"r{i}", "output": "Paris" if i % 3 else "Lyon", "reference": "Paris"} for i in range(30)
]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubLLM]:
    with StubLLM() as s:
        yield s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(server_state(tmp_path_factory.mktemp("server"))) as s:
        yield s.url


def _stats(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(m["evaluator"], m["metric"], m["n"], m["mean"], m["ci"]) for m in doc["metrics"]]


def _spec(tmp: Path, base_url: str) -> Path:
    write_jsonl(
        tmp / "qa.jsonl",
        [
            {"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}" if i % 4 else "x"}
            for i in range(10)
        ],
    )
    spec = tmp / "run.yaml"
    spec.write_text(
        f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: e2e-remote}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{base_url}", model: stub-echo}}
  dataset: {{path: qa.jsonl}}
  trials: 3
  evaluators:
    - ref: exact-match
    - ref: tokens
  gates: ["metric('exact-match').mean >= 0.5"]
  seed: 11
"""
    )
    return spec


def test_run_file_gives_the_same_figures_embedded_and_remote(
    cli: Cli, server: str, stub: StubLLM, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, stub.openai_url)
    local = parse_json_stdout(cli("run", "-f", spec, "--format", "json", "-q"))
    remote_proc = cli("run", "-f", spec, "--format", "json", "--server", server)
    remote = parse_json_stdout(remote_proc)
    assert _stats(remote) == _stats(local)
    assert remote["metrics"][0]["n"] == 30
    assert remote["metrics"][0]["pass_at_k"] == local["metrics"][0]["pass_at_k"]
    assert remote["tasks"] == local["tasks"]
    assert remote["trials"] == 3
    assert remote["gates"] == local["gates"]
    assert remote["graded"] is True
    assert remote["run_id"] != local["run_id"]
    table = cli("run", "-f", spec, "--server", server, "-q")
    assert table.returncode == 0, table.stderr
    assert "exact-match" in table.stdout
    assert "gates" in table.stdout


def test_eval_server_matches_embedded_and_env_var_works(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    args = ("eval", "--data", data, "--evaluators", "exact-match", "--format", "json")
    local = parse_json_stdout(cli(*args))
    remote = parse_json_stdout(cli(*args, "--server", server))
    assert _stats(remote) == _stats(local)
    via_env = parse_json_stdout(cli(*args, env={"EVALSI_SERVER": server}))
    assert _stats(via_env) == _stats(local)
    md = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--format", "md",
        "--gate", "metric('exact-match').mean >= 0.9", "--server", server,
    )  # fmt: skip
    assert md.returncode == 1, md.stderr  # the gate fails, as it would embedded
    assert "| exact-match | exact-match | 30 |" in md.stdout
    assert "failed" in md.stdout


def test_eval_server_names_the_run_and_compare_selects_metrics_there(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    args = ("eval", "--data", data, "--evaluators", "exact-match,contains", "--format", "json")
    gate = ("--gate", "metric('contains').mean >= 0.5")
    local = parse_json_stdout(cli(*args, *gate, "--name", "nightly"))
    remote = parse_json_stdout(cli(*args, *gate, "--name", "nightly", "--server", server))
    assert remote["gates"] == local["gates"]
    listed = parse_json_stdout(cli("runs", "list", "--format", "json", "--server", server))
    assert (listed["runs"][0]["run_id"], listed["runs"][0]["name"]) == (remote["run_id"], "nightly")
    other = parse_json_stdout(cli(*args, "--server", server))["run_id"]
    compared = parse_json_stdout(
        cli("compare", remote["run_id"], other, "--metric", "contains", "--format", "json",
            "--server", server)
    )  # fmt: skip
    assert [m["evaluator"] for m in compared["metrics"]] == ["contains"]
    missing = cli("compare", remote["run_id"], other, "--metric", "nope", "--server", server)
    check_user_error(missing, "no metric matches 'nope'")


def test_runs_compare_and_catalog_read_the_server(cli: Cli, server: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    ids = [
        parse_json_stdout(
            cli("eval", "--data", data, "--evaluators", "exact-match", "--format", "json",
                "--server", server)
        )["run_id"]
        for _ in range(2)
    ]  # fmt: skip
    listed = parse_json_stdout(cli("runs", "list", "--format", "json", "--server", server))
    assert [r["run_id"] for r in listed["runs"][:2]] == ids[::-1]
    assert listed["runs"][0]["evaluators"] == ["exact-match"]
    assert listed["runs"][0]["kind"] == "score"
    table = cli("runs", "list", "--server", server)
    assert ids[0] in table.stdout
    shown = parse_json_stdout(cli("runs", "show", ids[0], "--format", "json", "--server", server))
    assert shown["run_id"] == ids[0]
    assert shown["metrics"][0]["n"] == 30
    assert len(shown["failures"]) == 5
    assert shown["failures"][0]["record_id"] == "r0"
    compared = parse_json_stdout(
        cli("compare", ids[0], ids[1], "--format", "json", "--server", server)
    )
    assert compared["metrics"][0]["delta"] == 0.0
    assert compared["metrics"][0]["n_paired"] == 30
    text = cli("compare", ids[0], ids[1], "--server", server)
    assert "no significant change" in text.stdout
    catalog = parse_json_stdout(cli("catalog", "list", "--format", "json", "--server", server))
    local_catalog = parse_json_stdout(cli("catalog", "list", "--format", "json"))
    assert catalog == local_catalog
    show = cli("catalog", "show", "exact-match", "--server", server)
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith("builtin/exact-match@1.0.0")
    packs = parse_json_stdout(cli("catalog", "packs", "--format", "json", "--server", server))
    assert packs == parse_json_stdout(cli("catalog", "packs", "--format", "json"))


def test_errors_over_the_wire(cli: Cli, server: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    bad = cli("eval", "--data", data, "--evaluators", "exact-match,nope", "--server", server)
    check_user_error(bad, "unknown evaluator 'nope'")
    both = cli("eval", "--data", data, "--evaluators", "exact-match", "--store", "x.db",
               "--server", server)  # fmt: skip
    check_user_error(both, "--store cannot be combined with --server")
    missing = cli("runs", "show", "no-such-run", "--server", server)
    assert missing.returncode == 2, missing.stderr
    down = cli("eval", "--data", data, "--evaluators", "exact-match",
               "--server", "http://127.0.0.1:9")  # fmt: skip
    assert down.returncode == 3
    assert down.stderr.startswith("error: cannot reach the evalsi server at http://127.0.0.1:9")
    assert "Traceback" not in down.stderr
    listing = cli("runs", "list", env={"EVALSI_SERVER": "http://127.0.0.1:9"})
    assert listing.returncode == 3
    assert "cannot reach the evalsi server" in listing.stderr


def test_help_explains_server(cli: Cli) -> None:
    for command in (("eval",), ("run",), ("runs", "list"), ("compare",), ("catalog", "list")):
        out = cli(*command, "--help")
        assert out.returncode == 0
        assert "--server URL" in out.stdout
        assert "EVALSI_SERVER" in out.stdout, command

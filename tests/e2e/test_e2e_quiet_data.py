"""Data and targets that used to fail quietly (exit 0, no word) now say what happened, through
the real CLI: an empty file, every row bad, repeated ids, an unclosed CSV quote, bytes that are
not UTF-8, and a Run whose every target call failed (HTTP 403, a closed port, a name that does
not resolve, TLS spoken to a plain-HTTP server)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.stub_llm import Fault, StubLLM

Cli = Callable[..., Any]


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _shown(cli: Cli, run_id: str = "latest") -> dict[str, Any]:
    proc = cli("runs", "show", run_id, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


# -- Score: nothing to grade is exit 2 and says why ---------------------------------------------


def test_an_empty_file_is_exit_2_naming_the_file(cli: Cli, tmp_path: Path, user_error: Any) -> None:
    (tmp_path / "x.jsonl").write_bytes(b"")
    proc = cli("eval", "--data", "x.jsonl", "--evaluators", "exact-match", "--format", "json")
    user_error(proc, "x.jsonl: no records (the file is empty)")
    shown = _shown(cli)
    assert shown["status"] == "failed"
    assert "no records (the file is empty)" in shown["error"]


def test_every_record_bad_under_skip_is_exit_2(cli: Cli, tmp_path: Path, user_error: Any) -> None:
    (tmp_path / "x.jsonl").write_text('{"output": "a"\n[1, 2]\n7\n')
    proc = cli(
        "eval", "--data", "x.jsonl", "--evaluators", "exact-match", "--on-bad-record", "skip"
    )
    user_error(proc, "all 3 record(s) were bad and skipped (first: line 1: not valid JSON")


def test_some_bad_records_warn_on_stderr_and_in_json(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"output": "a", "reference": "a"}\nnope\n')
    proc = cli(
        "eval", "--data", "x.jsonl", "--evaluators", "exact-match",
        "--on-bad-record", "skip", "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: skipped 1 bad record(s) (first: line 2: not valid JSON" in proc.stderr
    out = json.loads(proc.stdout)
    assert [w["kind"] for w in out["warnings"]] == ["bad_records"]
    assert _shown(cli)["warnings"] == out["warnings"]


# -- repeated ids -------------------------------------------------------------------------------


def test_repeated_ids_warn_and_keep_every_record(cli: Cli, tmp_path: Path) -> None:
    rows = [{"id": i, "output": "a", "reference": "a"} for i in ("a", "b", "a", "c", "a")]
    _rows(tmp_path / "x.jsonl", rows)
    proc = cli("eval", "--data", "x.jsonl", "--evaluators", "exact-match", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "warning: 2 record(s) repeat an earlier record's id (first: id 'a' at line 3)" in (
        proc.stderr
    )
    out = json.loads(proc.stdout)
    (warning,) = out["warnings"]
    assert (warning["kind"], warning["count"]) == ("duplicate_ids", 2)
    assert out["metrics"][0]["n"] == 5  # results are keyed by position: nothing overwritten
    assert _shown(cli)["warnings"] == out["warnings"]


# -- CSV: an unclosed quote ---------------------------------------------------------------------


def test_an_unclosed_csv_quote_names_the_line_it_opens(
    cli: Cli, tmp_path: Path, user_error: Any
) -> None:
    (tmp_path / "x.csv").write_text('id,output,reference\n1,a,a\n2,"b,b\n3,c,c\n4,d,d\n')
    proc = cli("eval", "--data", "x.csv", "--evaluators", "exact-match")
    user_error(proc, "x.csv:3: a quote opens a cell here and is never closed", "(line 5)")
    skipped = cli(
        "eval", "--data", "x.csv", "--evaluators", "exact-match", "--on-bad-record", "skip",
        "--format", "json",
    )  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    assert "warning: skipped 1 bad record(s) (first: line 3: a quote opens" in skipped.stderr
    assert json.loads(skipped.stdout)["records"] == 1


# -- invalid UTF-8: the real byte offset --------------------------------------------------------


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_invalid_utf8_deep_in_a_file_names_its_byte_offset(
    cli: Cli, tmp_path: Path, user_error: Any, suffix: str
) -> None:
    if suffix == "jsonl":
        head = b"".join(b'{"id": "%d", "output": "%s"}\n' % (i, b"o" * 90) for i in range(2000))
        bad = b'{"id": "bad", "output": "caf\xe9"}\n'
    else:
        head = b"id,output\n" + b"".join(b"%d,%s\n" % (i, b"o" * 90) for i in range(2000))
        bad = b"bad,caf\xe9\n"
    data = head + bad + head[-200:]
    offset = len(head) + bad.index(b"\xe9")
    assert offset > 64 * 1024
    line = head.count(b"\n") + 1
    (tmp_path / f"x.{suffix}").write_bytes(data)
    proc = cli("eval", "--data", f"x.{suffix}", "--evaluators", "exact-match")
    user_error(proc, f"not UTF-8 text: byte 0xe9 at byte offset {offset} (line {line}, ")


# -- Run: every target call failed --------------------------------------------------------------

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: failing}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{url}", model: t}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 2
  evaluators:
    - ref: exact-match
"""


def _spec(tmp_path: Path, url: str, samples: int = 4) -> Path:
    _rows(
        tmp_path / "qa.jsonl",
        [{"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}"} for i in range(samples)],
    )
    spec = tmp_path / "run.yaml"
    spec.write_text(SPEC.format(url=url))
    return spec


def test_a_run_whose_every_call_answers_403_fails_with_its_cause(cli: Cli, tmp_path: Path) -> None:
    with StubLLM() as stub:
        stub.schedule(*[Fault(status=403)] * 4)
        spec = _spec(tmp_path, stub.openai_url)
        proc = cli("run", "-f", spec, "--format", "json", "-q")
        url = f"{stub.openai_url}/chat/completions"
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    expected = f"all 4 target calls failed: http_403 (4): HTTP 403 from {url}: injected HTTP 403"
    assert "error: run " in proc.stderr
    assert expected in proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "failed"
    assert expected in out["stopped_reason"]
    assert out["target_error_causes"] == [
        {"kind": "http_403", "count": 4, "example": f"HTTP 403 from {url}: injected HTTP 403"}
    ]
    assert out["infra_error_causes"] == []
    shown = _shown(cli, out["run_id"])
    assert shown["status"] == "failed"
    assert expected in shown["error"]
    assert shown["target_error_causes"] == out["target_error_causes"]
    table = cli("runs", "show", out["run_id"])
    assert "target error http_403 x4: HTTP 403 from" in table.stdout


def test_some_failed_calls_warn_with_counts_and_the_first_cause(cli: Cli, tmp_path: Path) -> None:
    with StubLLM() as stub:
        stub.schedule(Fault(status=403))
        spec = _spec(tmp_path, stub.openai_url)
        spec.write_text(spec.read_text().replace("maxConcurrency: 2", "maxConcurrency: 1"))
        proc = cli("run", "-f", spec, "--format", "json", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 4 target calls failed" in proc.stderr
    assert "http_403 (1): HTTP 403 from" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "done"
    assert [w["kind"] for w in out["warnings"]] == ["target_errors"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("refused", "connection refused by 127.0.0.1:"),
        ("dns", "DNS lookup of nonexistent.invalid failed"),
        ("tls", "TLS handshake with 127.0.0.1 failed: WRONG_VERSION_NUMBER"),
    ],
)
def test_an_unreachable_target_names_the_url_and_why(
    cli: Cli, tmp_path: Path, where: str, reason: str
) -> None:
    with StubLLM() as stub:
        url = {
            "refused": f"http://127.0.0.1:{_closed_port()}/v1",
            "dns": "http://nonexistent.invalid/v1",
            "tls": stub.openai_url.replace("http://", "https://"),
        }[where]
        spec = _spec(tmp_path, url, samples=2)
        proc = cli("run", "-f", spec, "--format", "json", "-q", timeout=180)
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "incomplete"
    assert out["infra_errors"] == 2
    causes = out["infra_error_causes"]
    assert sum(c["count"] for c in causes) == 2
    assert any(f"cannot reach {url}" in c["example"] and reason in c["example"] for c in causes)
    assert reason in proc.stderr
    assert "is incomplete" in proc.stderr
    assert reason in _shown(cli, out["run_id"])["error"]


def test_repeated_ids_in_a_run_warn_that_they_share_a_seed(cli: Cli, tmp_path: Path) -> None:
    with StubLLM() as stub:
        spec = _spec(tmp_path, stub.openai_url)
        _rows(tmp_path / "qa.jsonl", [{"id": "same", "input": f"q{i}"} for i in range(3)])
        proc = cli("run", "-f", spec, "--format", "json", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "2 record(s) repeat an earlier record's id" in proc.stderr
    assert "share the seed sent to the target" in proc.stderr
    assert json.loads(proc.stdout)["warnings"][0]["kind"] == "duplicate_ids"


def test_a_run_over_an_empty_dataset_is_exit_2(cli: Cli, tmp_path: Path, user_error: Any) -> None:
    with StubLLM() as stub:
        spec = _spec(tmp_path, stub.openai_url)
        (tmp_path / "qa.jsonl").write_bytes(b"")
        proc = cli("run", "-f", spec, "-q")
        assert stub.calls() == 0
    user_error(proc, "qa.jsonl: no records (the file is empty)")

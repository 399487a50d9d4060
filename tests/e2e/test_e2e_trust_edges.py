"""Issue 16, found by a new user's review: a mistyped --cluster-by key, an evaluator that judged
nothing, infrastructure failures in the table, a busy port, and small CLI consistencies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
QA = REPO / "examples" / "qa.jsonl"


def test_mistyped_cluster_key_exits_2_with_did_you_mean(cli: Any, user_error: Any) -> None:
    proc = cli("eval", "--data", QA, "--evaluators", "exact-match", "--cluster-by", "topc")
    user_error(proc, "cluster key 'topc'", "'topic'", "did you mean 'topic'?")


def test_cluster_key_some_records_lack_warns(cli: Any, write_jsonl: Any, tmp_path: Path) -> None:
    data = [
        {"id": str(i), "output": "a", "reference": "a", "metadata": {"topic": f"t{i % 2}"}}
        for i in range(4)
    ] + [{"id": "x", "output": "a", "reference": "a"}]
    write_jsonl(tmp_path / "d.jsonl", data)
    args = ("eval", "--data", "d.jsonl", "--evaluators", "exact-match", "--cluster-by", "topic")
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 5 record(s) have no metadata 'topic'" in proc.stderr
    out = json.loads(cli(*args, "--format", "json").stdout)
    assert [w["kind"] for w in out["warnings"]] == ["cluster_key_missing"]
    assert out["metrics"][0]["ci_method"] == "cluster-wilson"


def _judge_rows(tmp_path: Path, write_jsonl: Any) -> None:
    rows = [{"id": f"q{i}", "input": f"q{i}", "output": "a", "reference": "a"} for i in range(3)]
    write_jsonl(tmp_path / "qa.jsonl", rows)


def test_judge_refusing_its_key_exits_2_naming_judge(
    cli: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    from tests.support.stub_llm import StubLLM

    _judge_rows(tmp_path, write_jsonl)
    args = ["eval", "--data", "qa.jsonl", "--evaluators", "llm-judge,exact-match",
            "--param", "llm-judge.rubric=ok?", "--judges", "judges.yaml"]  # fmt: skip
    with StubLLM(require_key="right") as stub:
        (tmp_path / "judges.yaml").write_text(
            f"default: {{connector: openai-compatible, baseUrl: '{stub.openai_url}', model: j,"
            " secretRef: 'env:JUDGE_KEY'}\n"
        )
        proc = cli(*args, env={"JUDGE_KEY": "wrong"})
        as_json = cli(*args, "--format", "json", env={"JUDGE_KEY": "wrong"})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: llm-judge judged nothing: all 3 result(s) are errors; first: " in proc.stderr
    assert "HTTP 401" in proc.stderr
    hint = "check the API key judge 'default''s secretRef (env:JUDGE_KEY) points to"
    assert hint in proc.stderr
    assert "target's secretRef" not in proc.stderr + proc.stdout
    assert as_json.returncode == 2
    out = json.loads(as_json.stdout)
    (warning,) = out["warnings"]
    assert (warning["kind"], warning["evaluator"], warning["count"]) == (
        "nothing_judged",
        "llm-judge",
        3,
    )


def test_file_evaluator_raising_on_every_record_exits_2(
    cli: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    _judge_rows(tmp_path, write_jsonl)
    (tmp_path / "mine.py").write_text(
        "from evalsi import evaluator\n\n"
        "@evaluator(name='mine/broken', output='passed')\n"
        "def broken(record):\n"
        "    raise ValueError('column missing: score')\n"
    )
    proc = cli("eval", "--data", "qa.jsonl", "--evaluators", "mine.py:broken,exact-match")
    assert proc.returncode == 2, proc.stderr
    assert "ValueError: column missing: score" in proc.stderr
    assert "judged nothing: all 3 result(s) are errors" in proc.stderr
    # one record scored is enough to judge: exit 0 and no error line
    write_jsonl(tmp_path / "qa.jsonl", [{"id": "ok", "output": "a", "reference": "a"}])
    (tmp_path / "mine.py").write_text(
        "from evalsi import evaluator\n\n"
        "@evaluator(name='mine/half', output='passed')\n"
        "def half(record):\n"
        "    return True\n"
    )
    proc = cli("eval", "--data", "qa.jsonl", "--evaluators", "mine.py:half")
    assert proc.returncode == 0, proc.stderr
    assert "judged nothing" not in proc.stderr


def test_infra_column_only_when_infrastructure_lost_results(
    cli: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    from tests.support.server_state import free_port
    from tests.support.stub_llm import StubLLM

    _judge_rows(tmp_path, write_jsonl)
    args = ["eval", "--data", "qa.jsonl", "--evaluators", "llm-judge,exact-match",
            "--param", "llm-judge.rubric=ok?", "--judges", "judges.yaml"]  # fmt: skip
    (tmp_path / "judges.yaml").write_text(
        "default: {connector: openai-compatible, "
        f"baseUrl: 'http://127.0.0.1:{free_port()}/v1', model: j}}\n"
    )
    lost = cli(*args)
    with StubLLM(default='{"score": 0.8, "explanation": "fine"}') as stub:
        (tmp_path / "judges.yaml").write_text(
            f"default: {{connector: openai-compatible, baseUrl: '{stub.openai_url}', model: j}}\n"
        )
        ok = cli(*args)
    assert lost.returncode == 3, lost.stderr
    assert ok.returncode == 0, ok.stderr

    def table(proc: Any) -> list[list[str]]:
        lines = proc.stdout.split("\n\n")[0].splitlines()[1:]  # after the title
        return [line.split() for line in lines if not line.startswith("-")]

    header, *rows = table(lost)
    assert header[-2:] == ["errors", "infra"]
    infra = {r[1]: r[-1] for r in rows}  # the last column
    # the same rows as a run whose judge answered: no llm-judge-passed without a threshold
    assert infra == {"llm-judge": "3", "exact-match": "0"}
    header, *rows = table(ok)
    assert "infra" not in header
    assert sorted(r[1] for r in rows) == ["exact-match", "llm-judge"]


def _blocked(blocked: str, *argv: Any, cwd: Path, path: str | None = None) -> Any:
    """The CLI with the ``blocked`` packages unimportable (a core-only install)."""
    import os
    import subprocess
    import sys

    from tests.unit.cli.test_cli_extras import BLOCKER

    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, blocked, *map(str, argv)],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_code_evaluator_without_a_sandbox_stops_before_any_record(tmp_path: Path) -> None:
    solutions = REPO / "examples" / "code" / "solutions.jsonl"
    args = ("eval", "--data", solutions, "--evaluators", "code-exec-tests")
    no_seccomp = _blocked("pyseccomp", *args, cwd=tmp_path)
    assert no_seccomp.returncode == 2, no_seccomp.stderr
    assert no_seccomp.stderr.startswith("error: code-exec-tests runs code only in a sandbox ")
    assert "hint: pip install 'evalsi[sandbox]'" in no_seccomp.stderr
    assert len(no_seccomp.stderr.strip().splitlines()) == 2
    empty = tmp_path / "bin"
    empty.mkdir()
    no_bwrap = _blocked("", *args, cwd=tmp_path, path=str(empty))
    assert no_bwrap.returncode == 2, no_bwrap.stderr
    assert "hint: apt-get install bubblewrap" in no_bwrap.stderr
    from evalsi.sandbox import default_ladder

    if not any(r.driver == "landlock" and r.available for r in default_ladder().probe_all()):
        return
    # a floor the landlock rung meets: the run goes on (confined, never unconfined)
    confined = _blocked(
        "", *args, "--param", "code-exec-tests.min_isolation=confined", "--format", "json",
        cwd=tmp_path, path=str(empty),
    )  # fmt: skip
    assert confined.returncode in (0, 1), confined.stderr
    assert json.loads(confined.stdout)["isolation"][0]["level"] == "confined"


def test_serve_on_a_busy_port_exits_3_with_one_error_line(run_evalsi: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_evalsi(tmp_path, "serve", "--port", port, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    # never claimed to listen on a port it could not bind
    assert "listening on" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: address already in use",
        "  hint: another evalsi serve may be running; pick another --port",
    ]


def test_grade_accepts_quiet_like_eval_and_run(cli: Any, tmp_path: Path) -> None:
    import shutil

    examples = REPO / "examples"
    shutil.copy(QA, tmp_path / "qa.jsonl")
    shutil.copy(examples / "run-python.yaml", tmp_path / "run.yaml")
    env = {"PYTHONPATH": str(examples)}
    executed = cli("run", "-f", "run.yaml", "--execute-only", "-q", "--format", "json", env=env)
    assert executed.returncode == 0, executed.stderr
    run_id = json.loads(executed.stdout)["run_id"]
    for flag in ("-q", "--quiet"):
        graded = cli("grade", "--from", run_id, "--evaluators", "exact-match", flag)
        assert graded.returncode == 0, graded.stderr
        assert graded.stderr == ""
        assert f"source run {run_id}" in graded.stdout


def test_report_takes_show_failures_as_eval_run_and_grade_do(cli: Any) -> None:
    ran = cli("eval", "--data", QA, "--evaluators", "exact-match", "--store", "s.db", "-q")
    assert ran.returncode in (0, 1), ran.stderr

    def report(*flags: Any) -> str:
        proc = cli("report", "latest", "-o", "-", "--format", "md", "--store", "s.db", *flags)
        assert proc.returncode == 0, proc.stderr
        return str(proc.stdout)

    one = report("--failures", "1")
    assert report("--show-failures", "1") == one
    assert report("--show-failures", "0") == report("--failures", "0") != one


def test_runs_show_keeps_the_whole_hint_of_a_long_error(cli: Any, tmp_path: Path) -> None:
    import shutil
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    # An endpoint refusing the key with a long message, as OpenAI's 401 is
    message = (
        "Incorrect API key provided: sk-wrong. You can find your API key at "
        "https://platform.openai.com/account/api-keys. " + "Check your organization. " * 8
    )

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"error": {"message": message}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    shutil.copy(QA, tmp_path / "qa.jsonl")
    with ThreadingHTTPServer(("127.0.0.1", 0), Refuse) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        spec = (REPO / "examples" / "run-stub.yaml").read_text()
        (tmp_path / "run.yaml").write_text(
            spec.replace("http://127.0.0.1:18080/v1", url).replace("trials: 3", "trials: 1")
        )
        ran = cli("run", "-f", "run.yaml", "-q")
        server.shutdown()
    assert ran.returncode == 2, ran.stderr
    shown = cli("runs", "show", "latest")
    assert shown.returncode == 0, shown.stderr
    hints = [line for line in shown.stdout.splitlines() if "hint:" in line]
    assert hints, shown.stdout
    assert all(h == "  hint: check the API key the target's secretRef points to" for h in hints)
    assert "Incorrect API key provided" in shown.stdout  # the message, cut to make room


def test_a_non_evaluator_name_reads_an_int_and_a_list(
    cli: Any, user_error: Any, tmp_path: Path
) -> None:
    (tmp_path / "mine.py").write_text("COUNT = 3\nNAMES = ['a']\n", encoding="utf-8")
    for name, kind in (("COUNT", "an int"), ("NAMES", "a list")):
        proc = cli("eval", "--data", QA, "--evaluators", f"mine.py:{name}")
        user_error(proc, f"'mine.py:{name}': is {kind}, not an evaluator")


def test_python_dash_m_evalsi_is_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    def module(*argv: str) -> Any:
        return subprocess.run(
            [sys.executable, "-m", "evalsi", *argv],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip

    helped = module("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: evalsi ")
    wrong = module("eval", "--data", "missing.jsonl", "--evaluators", "exact-match")
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("error: ")
    assert "Traceback" not in wrong.stderr

"""`evalsi eval --judges FILE`: judge-pack evaluators get their judge from a YAML file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.stub_llm import OPENAI_PATH, StubLLM

VERDICT = '{"score": 0.8, "explanation": "mostly right"}'


def test_judges_file_feeds_llm_judge_and_a_rerun_hits_the_cache(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "qa.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "input": f"question {i}", "output": f"answer {i}"}) + "\n"
            for i in range(6)
        )
    )
    args = [
        "eval", "--data", "qa.jsonl", "--evaluators", "llm-judge",
        "--param", "llm-judge.rubric=Is the answer helpful?", "--judges", "judges.yaml",
        "--format", "json",
    ]  # fmt: skip
    with StubLLM(default=VERDICT) as stub:
        (tmp_path / "judges.yaml").write_text(
            f"default: {{connector: openai-compatible, baseUrl: '{stub.openai_url}', model: j}}\n"
        )
        first = run_evalsi(tmp_path, *args)
        calls = stub.calls(OPENAI_PATH)
        second = run_evalsi(tmp_path, *args)
        assert stub.calls(OPENAI_PATH) == calls  # the warm run asked the judge nothing
    assert first.returncode == 0, first.stderr
    assert calls == 6
    metric = json.loads(first.stdout)["metrics"][0]
    assert metric["n"] == 6
    assert json.loads(second.stdout)["metrics"][0]["mean"] == metric["mean"]


def test_missing_or_bad_judges_file_is_a_clear_error(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "qa.jsonl").write_text('{"input": "q", "output": "a"}\n')
    base = ["eval", "--data", "qa.jsonl", "--evaluators", "llm-judge", "--param",
            "llm-judge.rubric=ok?"]  # fmt: skip
    no_judge = run_evalsi(tmp_path, *base)
    assert no_judge.returncode == 2
    assert "no default judge" in no_judge.stderr
    missing = run_evalsi(tmp_path, *base, "--judges", "nope.yaml")
    assert missing.returncode == 2
    assert "--judges nope.yaml" in missing.stderr
    (tmp_path / "bad.yaml").write_text("- just\n- a list\n")
    bad = run_evalsi(tmp_path, *base, "--judges", "bad.yaml")
    assert bad.returncode == 2
    assert "expected a mapping" in bad.stderr
    for proc in (no_judge, missing, bad):
        assert "Traceback" not in proc.stderr


def test_an_unreachable_judge_exits_3_and_says_so(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.support.server_state import free_port

    (tmp_path / "qa.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "output": "a", "reference": "a"}) + "\n" for i in range(3)
        )
    )
    (tmp_path / "judges.yaml").write_text(
        "default: {connector: openai-compatible, "
        f"baseUrl: 'http://127.0.0.1:{free_port()}/v1', model: j}}\n"
    )
    args = ["eval", "--data", "qa.jsonl", "--evaluators", "reference-correctness,exact-match",
            "--judges", "judges.yaml", "--format", "json"]  # fmt: skip
    proc = run_evalsi(tmp_path, *args)
    assert proc.returncode == 3, proc.stderr
    assert "reference-correctness judged nothing: every record failed on infrastructure" in (
        proc.stderr
    )
    by_name = {m["evaluator"]: m for m in json.loads(proc.stdout)["metrics"]}
    assert by_name["reference-correctness"]["infra_errors"] == 3
    assert by_name["exact-match"]["n"] == 3

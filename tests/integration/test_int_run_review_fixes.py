"""Edge cases of Run found in review: all-infra runs, resume on a changed dataset, empty ids."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsi.core import SpecError, UserError
from evalsi.runs import execute_run
from evalsi.store import SqlStore
from tests.integration.run_support import fast_retries, model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


def test_a_run_whose_every_task_was_lost_could_not_finish(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 3)
    with StubLLM() as stub:
        stub.schedule(*[Fault(status=503, retry_after="0")] * 20, path=OPENAI_PATH)
        spec = model_spec(stub.openai_url, data, concurrency=1)
        result = asyncio.run(
            execute_run(
                spec, store=tmp_path / "s.db", resilience=fast_retries(2), registry=BUILTINS
            )
        )
    assert result.status == "incomplete"
    assert result.exit_code == 3
    assert result.infra_errors == 3
    assert result.metric("exact-match").n == 0


def test_resume_refuses_a_dataset_that_changed(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 6)
    with StubLLM() as stub:
        stub.schedule(None, None, *[Fault(status=503, retry_after="0")] * 20, path=OPENAI_PATH)
        spec = model_spec(stub.openai_url, data, concurrency=1)
        first = asyncio.run(
            execute_run(
                spec, store=tmp_path / "s.db", resilience=fast_retries(1), registry=BUILTINS
            )
        )
        assert first.infra_errors > 0
        lines = data.read_text().splitlines()
        data.write_text("\n".join(reversed(lines)) + "\n")  # same path, other order
        with pytest.raises(SpecError, match="dataset changed"):
            asyncio.run(
                execute_run(
                    spec,
                    store=tmp_path / "s.db",
                    resume=first.run_id,
                    resilience=fast_retries(1),
                    registry=BUILTINS,
                )
            )
    # the refused resume left the run as it was
    assert SqlStore.open(tmp_path / "s.db").get_run(first.run_id).status == "done"


def test_judge_infra_errors_are_redone_on_resume(tmp_path: Path) -> None:
    from evalsi.specs import run_spec_from_yaml

    (tmp_path / "qa.jsonl").write_text(
        "".join(json.dumps({"id": f"s{i}", "input": f"q{i}"}) + "\n" for i in range(3))
    )
    spec_text = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: judge-resume}}
spec:
  target: {{model: {{connector: openai-compatible, baseUrl: "{target}", model: t}}}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 1
  evaluators: [{{ref: llm-judge, params: {{rubric: "ok?"}}}}]
  judges: {{default: {{connector: openai-compatible, baseUrl: "{judge}", model: j}}}}
"""
    with StubLLM() as target, StubLLM(default='{"score": 1, "explanation": "ok"}') as judge:
        judge.schedule(*[Fault(status=503, retry_after="0")] * 60, path=OPENAI_PATH)
        text = spec_text.format(target=target.openai_url, judge=judge.openai_url)
        spec = run_spec_from_yaml(text, base_dir=tmp_path)
        first = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        assert first.metric("llm-judge").infra_errors == 3
        judge.clear_faults()  # the judge is healthy again
        resumed = asyncio.run(
            execute_run(spec, store=tmp_path / "s.db", resume=first.run_id, registry=BUILTINS)
        )
    m = resumed.metric("llm-judge")
    assert (m.n, m.infra_errors) == (3, 0)


def test_an_empty_run_id_is_an_error(tmp_path: Path) -> None:
    db = SqlStore.open(tmp_path / "s.db")
    db.create_run(kind="score", spec={})
    with pytest.raises(UserError, match="run id is empty"):
        db.get_run("  ")

"""`grade --from` uses the source run's judges (or those given), so judges grade saved outputs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.runs import execute_run, grade_run
from evalsi.specs import run_spec_from_yaml
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: graded-later}}
spec:
  target: {{python: "gradejudge_target:answer"}}
  dataset: {{path: qa.jsonl}}
  trials: 2
  evaluators: [{{ref: exact-match}}]
  judges:
    default: {{connector: openai-compatible, baseUrl: "{judge}", model: judge-model}}
"""

TARGET = "def answer(text):\n    return 'a' + text[1:]\n"


def test_grade_from_uses_the_source_runs_judges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (tmp_path / "qa.jsonl").open("w") as f:
        for i in range(5):
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"}) + "\n")
    (tmp_path / "gradejudge_target.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    rubric = {"ref": "llm-judge", "params": {"rubric": "right?"}}
    with StubLLM(default='{"score": 0.5, "explanation": "ok"}') as judge:
        spec = run_spec_from_yaml(SPEC.format(judge=judge.openai_url), base_dir=tmp_path)
        store = tmp_path / "s.db"
        executed = asyncio.run(execute_run(spec, store=store, execute_only=True, registry=BUILTINS))
        assert judge.calls(OPENAI_PATH) == 0  # nothing graded yet
        graded = asyncio.run(grade_run(store, executed.run_id, [rubric], registry=BUILTINS))
        calls = judge.calls(OPENAI_PATH)
        with pytest.raises(UserError, match="no default judge"):
            asyncio.run(grade_run(store, executed.run_id, [rubric], judges={}, registry=BUILTINS))
    assert calls == 5  # two trials give identical outputs: the cache judges each once
    m = graded.metric("llm-judge")
    assert m.n == 10
    assert m.mean == pytest.approx(0.5)

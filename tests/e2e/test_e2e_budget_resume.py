"""A run stopped by its budget resumes under a raised budget: `evalsi run -f run.yaml --resume`
after editing `spec.budget`. No task runs twice, and what identifies the work (the spec hash,
the judge cache keys) is unchanged by the budget."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalsi.runs import load_run_spec
from evalsi.store import SqlStore
from tests.support.stub_llm import OPENAI_PATH, StubLLM

SAMPLES = 30
SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: budgeted}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{target}", model: t}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 1
  evaluators:
    - ref: llm-judge
      params: {{rubric: "Does it answer?"}}
  judges:
    default: {{connector: openai-compatible, baseUrl: "{judge}", model: j, maxConcurrency: 1}}
  budget: {{tokens: {tokens}}}
"""


def _asked(stub: StubLLM) -> Counter[str]:
    """How many times each sample's input reached the target."""
    return Counter(r.body["messages"][-1]["content"] for r in stub.requests(OPENAI_PATH))


def test_a_budget_stopped_run_resumes_under_a_raised_budget(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    with (tmp_path / "qa.jsonl").open("w") as f:
        for i in range(SAMPLES):
            f.write(json.dumps({"id": f"s{i}", "input": f"question {i}"}) + "\n")
    spec, db = tmp_path / "run.yaml", tmp_path / "s.db"
    common = ["--store", db, "--format", "json", "-q"]
    verdict = '{"score": 1, "explanation": "answers"}'
    # The target answers slower than the judge, so the judges spend the budget mid-run.
    with StubLLM(latency_ms=60) as target, StubLLM(default=verdict) as judge:
        urls = {"target": target.openai_url, "judge": judge.openai_url}
        spec.write_text(SPEC.format(tokens=400, **urls))
        first = run_evalsi(tmp_path, "run", "-f", spec, *common)
        assert first.returncode == 3, first.stderr  # stopped: the run could not finish
        stopped = json.loads(first.stdout)
        assert stopped["status"] == "stopped"
        assert stopped["stopped_reason"].startswith("budget(tokens)")
        done_before = sum(stopped["tasks"].values())
        assert 0 < done_before < SAMPLES, (stopped["tasks"], stopped["spend"])
        hash_before = load_run_spec(spec).spec_hash
        judged_before = judge.calls(OPENAI_PATH)

        spec.write_text(SPEC.format(tokens=10_000_000, **urls))
        assert load_run_spec(spec).spec_hash == hash_before  # the budget is not the work
        resumed = run_evalsi(tmp_path, "run", "-f", spec, "--resume", stopped["run_id"], *common)
        assert resumed.returncode == 0, resumed.stderr
        finished = json.loads(resumed.stdout)
        asked = _asked(target)
        judged = judge.calls(OPENAI_PATH)

        # A new run of the raised spec calls the target again, but every judge answer comes
        # from the cache: the judge cache keys did not change with the budget.
        again = run_evalsi(tmp_path, "run", "-f", spec, *common)
        assert again.returncode == 0, again.stderr
        assert judge.calls(OPENAI_PATH) == judged

    assert finished["run_id"] == stopped["run_id"]
    assert finished["status"] == "done"
    assert finished["tasks"] == {"ok": SAMPLES}
    assert finished["metrics"][0]["n"] == SAMPLES
    # no task ran twice: each sample reached the target once, and was judged once
    assert asked == Counter({f"question {i}": 1 for i in range(SAMPLES)})
    assert judged == SAMPLES
    assert judged_before < SAMPLES
    store = SqlStore.open(db)
    run = store.get_run(finished["run_id"])
    store.close()
    assert run.spec["spec_hash"] == hash_before
    assert run.manifest is not None
    assert run.manifest["spec_hash"] == hash_before
    assert json.loads(again.stdout)["metrics"][0]["mean"] == finished["metrics"][0]["mean"]


def test_a_changed_spec_still_cannot_resume(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "qa.jsonl").write_text(
        "".join(json.dumps({"id": f"s{i}", "input": f"q {i}"}) + "\n" for i in range(20))
    )
    spec, db = tmp_path / "run.yaml", tmp_path / "s.db"
    with StubLLM() as target, StubLLM(default='{"score": 1}') as judge:
        urls = {"target": target.openai_url, "judge": judge.openai_url}
        spec.write_text(SPEC.format(tokens=300, **urls))
        first = run_evalsi(tmp_path, "run", "-f", spec, "--store", db, "--format", "json", "-q")
        run_id = json.loads(first.stdout)["run_id"]
        changed = SPEC.format(tokens=10_000_000, **urls).replace("Does it answer?", "Is it right?")
        spec.write_text(changed)
        refused = run_evalsi(tmp_path, "run", "-f", spec, "--store", db, "--resume", run_id)
    assert refused.returncode == 2
    assert "spec.spec.evaluators" in refused.stderr
    assert "budget" not in refused.stderr  # only what changed the work is named

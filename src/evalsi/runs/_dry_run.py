"""The plan of a run without running it: tasks, projected tokens and cost, budget checks."""

from __future__ import annotations

import itertools
from typing import Any

from evalsi.connectors import Target, input_messages
from evalsi.core import Content
from evalsi.datasets import Dataset
from evalsi.evaluators import BoundEvaluator, UsesJudge
from evalsi.runs._pricing import price
from evalsi.runs._targets import Render, RenderError, identity
from evalsi.specs import RunSpec

DEFAULT_OUTPUT_TOKENS = 256


def plan_run(
    spec: RunSpec, target: Target, render: Render, dataset: Dataset, bound: list[BoundEvaluator]
) -> dict[str, Any]:
    """Read the dataset (no call, no store write) and project what the run would use.

    Tokens are rough: input characters / 4 (system prompt included) plus ``params.max_tokens``
    (or 256) per call. Cost comes from the pricing table (``EVALSI_PRICING`` extends it).
    """
    params = spec.target.params
    out_per_call = params.get("max_tokens", params.get("max_completion_tokens"))
    if not isinstance(out_per_call, int) or out_per_call <= 0:
        out_per_call = DEFAULT_OUTPUT_TOKENS
    system_chars = len(spec.target.system)
    samples = input_tokens = unrenderable = 0
    records = itertools.chain.from_iterable(dataset.iter_batches(1024))
    for record in itertools.islice(records, spec.dataset.limit):
        samples += 1
        try:
            request = render(record)
        except RenderError:
            unrenderable += 1
            continue
        input_tokens += (_chars(request) + system_chars) // 4 + 1
    calls = samples * spec.trials
    total_in = input_tokens * spec.trials
    total_out = (samples - unrenderable) * spec.trials * out_per_call
    usd: float | None = None
    note = ""
    prices = price(spec.target.model) if spec.target.kind == "model" else None
    if prices is not None:
        usd = (total_in * prices[0] + total_out * prices[1]) / 1e6
    elif spec.target.kind == "model":
        note = f"no price for model {spec.target.model!r}; add it to a file named by EVALSI_PRICING"
    elif spec.target.kind == "agent":
        note = "an agent makes as many model calls as it takes (up to maxSteps per task)"
    else:
        note = f"a {spec.target.kind} target has no token price"
    judges = _project_judges(spec, bound, total_in, total_out, samples - unrenderable)
    judge_tokens = sum(j["tokens"] for j in judges.values())
    judge_usd = [j["usd"] for j in judges.values()]
    if usd is not None and None not in judge_usd:
        usd += sum(u for u in judge_usd if u is not None)
    elif None in judge_usd:
        usd, note = None, note or "a judge's model has no price; add it to EVALSI_PRICING"
    tokens = total_in + total_out + judge_tokens
    projected: dict[str, Any] = {
        "calls": calls,
        "input_tokens": total_in,
        "output_tokens": total_out,
        "judge_tokens": judge_tokens,
        "tokens": tokens,
        "usd": usd,
        "note": note,
        "judges": judges,
    }
    budget: dict[str, Any] = {}
    limits = spec.budget
    if limits is not None and limits.tokens is not None:
        budget["tokens"] = _budget_check(limits.tokens, tokens, "")
    if limits is not None and limits.usd is not None:
        budget["usd"] = _budget_check(limits.usd, usd, f"cannot check: cost unknown ({note})")
    if limits is not None and limits.wall_clock_s is not None:
        budget["wall_clock_s"] = _budget_check(limits.wall_clock_s, None, "checked while running")
    described, unpinned = identity(target, spec.target)
    return {
        "name": spec.name,
        "samples": samples,
        "trials": spec.trials,
        "tasks": calls,
        "unrenderable": unrenderable,
        "max_concurrency": spec.max_concurrency,
        "evaluators": [b.spec() for b in bound],
        "target": described,
        "unpinned": unpinned,
        "gates": list(spec.gates),
        "projected": projected,
        "budget": budget,
        "spec_hash": spec.spec_hash,
    }


def _budget_check(limit: float, projected: float | None, unknown: str) -> dict[str, Any]:
    """One budget limit against its projection (``unknown`` says why there is none)."""
    within = None if projected is None else projected <= limit
    verdict = unknown if within is None else "within" if within else "would stop the run early"
    return {"limit": limit, "projected": projected, "within": within, "verdict": verdict}


JUDGE_PROMPT_TOKENS = 200  # the rubric template around the sample, roughly
JUDGE_ANSWER_TOKENS = 150  # a score and a short explanation


def _project_judges(
    spec: RunSpec, bound: list[BoundEvaluator], target_in: int, target_out: int, graded: int
) -> dict[str, dict[str, Any]]:
    """Rough judge use per judge: each graded task's input and output go to the judge once per
    judge-pack evaluator (twice for pairwise, which swaps the order); no cache hit assumed."""
    out: dict[str, dict[str, Any]] = {}
    per_task_in = (target_in + target_out) / max(graded * spec.trials, 1) + JUDGE_PROMPT_TOKENS
    for b in bound:
        instance = b.instance
        if not isinstance(instance, UsesJudge):
            continue
        calls = graded * spec.trials * (2 if b.manifest.ref.name == "pairwise" else 1)
        entry = out.setdefault(instance.judge, {"calls": 0, "tokens": 0, "usd": 0.0})
        tokens_in, tokens_out = int(calls * per_task_in), calls * JUDGE_ANSWER_TOKENS
        entry["calls"] += calls
        entry["tokens"] += tokens_in + tokens_out
        judge = spec.judges.get(instance.judge)
        prices = price(judge.model) if judge is not None else None
        if prices is None or entry["usd"] is None:
            entry["usd"] = None
        else:
            entry["usd"] += (tokens_in * prices[0] + tokens_out * prices[1]) / 1e6
    return out


def _chars(request: Any) -> int:
    if isinstance(request, str):
        return len(request)
    if isinstance(request, Content) and request.kind != "messages":
        return len(request.as_text())
    return sum(len(m.content or "") for m in input_messages(request))

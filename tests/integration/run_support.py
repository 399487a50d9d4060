"""Helpers shared by the Run integration tests (specs built in code, datasets on disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from evalsi.connectors import Resilience, RetryPolicy
from evalsi.specs import BudgetSpec, DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec


def write_qa(path: Path, n: int) -> Path:
    """``n`` samples: input ``q{i}``, reference ``a{i}``."""
    with path.open("wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"}) + b"\n")
    return path


def model_spec(
    base_url: str,
    data: Path,
    *,
    trials: int = 1,
    concurrency: int = 8,
    budget: BudgetSpec | None = None,
    gates: tuple[str, ...] = (),
    **extra: Any,
) -> RunSpec:
    return RunSpec(
        name="it",
        target=TargetSpec(
            kind="model",
            connector="openai-compatible",
            base_url=base_url,
            model="stub-model",
            params={"max_tokens": 16},
        ),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=trials,
        max_concurrency=concurrency,
        budget=budget,
        gates=gates,
        **extra,
    )


def fast_retries(attempts: int = 3) -> Resilience:
    return Resilience(retry=RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.05))

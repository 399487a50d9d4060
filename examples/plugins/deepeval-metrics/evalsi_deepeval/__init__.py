"""DeepEval's G-Eval as an evalsi evaluator (``deepeval/geval``), for ``evalsi plugin install``:
deepeval and its pins live in this plugin's venv. The judge is the run's judge named by
``judge`` (``default``), which the host serves to the plugin for each batch, or, when
``judge_base_url`` is given, that OpenAI-compatible endpoint (``judge_model``, the key in the
environment variable ``judge_key_env``); either is called through ``Endpoint``, a DeepEval
model of a few lines."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # no calls home from a grader

from deepeval.metrics import GEval
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import LLMTestCase, SingleTurnParams

from evalsi.core import Score
from evalsi.evaluators import RecordError, evaluator
from evalsi.plugins import judge_endpoint


class Endpoint(DeepEvalBaseLLM):  # type: ignore[misc]
    """An OpenAI-compatible chat endpoint as a DeepEval model; structured answers are parsed
    into DeepEval's schema."""

    def __init__(self, base_url: str, model: str, api_key: str = "") -> None:
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key

    def load_model(self) -> Endpoint:
        return self

    def get_model_name(self) -> str:
        return self.model

    def generate(self, prompt: str, schema: Any = None) -> Any:
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}]}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            text = json.loads(response.read())["choices"][0]["message"]["content"]
        return schema(**json.loads(text)) if schema is not None else text

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        return self.generate(prompt, schema)


def endpoint(base_url: str, model: str, key_env: str) -> Endpoint:
    """The endpoint given in params, else the run's judge the host serves for this batch."""
    if not base_url:
        served = judge_endpoint()
        return Endpoint(served.base_url, served.model, served.api_key)
    if not model:
        raise RecordError("judge_model is required with judge_base_url")
    return Endpoint(base_url, model, os.environ.get(key_env, "") if key_env else "")


_FIELDS = {
    "input": SingleTurnParams.INPUT,
    "output": SingleTurnParams.ACTUAL_OUTPUT,
    "reference": SingleTurnParams.EXPECTED_OUTPUT,
}


def geval_score(
    record_input: str,
    output: str,
    reference: str | None,
    *,
    criteria: str,
    evaluation_steps: list[str],
    judge: DeepEvalBaseLLM,
) -> tuple[float, str]:
    """G-Eval's score and reason for one case: what the evaluator and the tests both call."""
    params = [_FIELDS["input"], _FIELDS["output"]] + ([_FIELDS["reference"]] if reference else [])
    metric = GEval(
        name="geval",
        criteria=criteria,
        evaluation_steps=evaluation_steps or None,
        evaluation_params=params,
        model=judge,
        async_mode=False,
    )
    case = LLMTestCase(input=record_input, actual_output=output, expected_output=reference)
    metric.measure(case)
    return float(metric.score), str(metric.reason or "")


@evaluator(name="deepeval/geval", version="4.3.1", output="number", requires=("input", "output"))
def geval(
    record: Any,
    *,
    criteria: str,
    evaluation_steps: list[str] = [],  # noqa: B006 - a params default, never mutated
    judge: str = "default",
    judge_base_url: str = "",
    judge_model: str = "",
    judge_key_env: str = "",
) -> Score:
    """DeepEval's G-Eval score in [0, 1] for criteria in plain words, by an LLM judge: the
    run's judge named ``judge``, or the endpoint at ``judge_base_url``."""
    score, reason = geval_score(
        record.input.as_text(),
        record.output.as_text(),
        record.reference.as_text() if record.reference is not None else None,
        criteria=criteria,
        evaluation_steps=list(evaluation_steps),
        judge=endpoint(judge_base_url, judge_model, judge_key_env),
    )
    return Score(number=score, explanation=reason)


EVALUATORS = (geval,)

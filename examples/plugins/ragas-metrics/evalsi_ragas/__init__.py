"""RAGAS's AspectCritic as an evalsi evaluator (``ragas/aspect-critic``), for ``evalsi plugin
install``: ragas, langchain and their pins live in this plugin's venv. The judge is the run's
judge named by ``judge`` (``default``), which the host serves to the plugin for each batch, or,
when ``judge_base_url`` is given, that OpenAI-compatible endpoint (``judge_model``, the key in
the environment variable ``judge_key_env``); either through langchain's ``ChatOpenAI``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # no calls home from a grader

from langchain_openai import ChatOpenAI
from ragas import SingleTurnSample
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import AspectCritic

from evalsi.core import Score
from evalsi.evaluators import RecordError, evaluator
from evalsi.plugins import judge_endpoint


def llm(base_url: str, model: str, key_env: str = "") -> LangchainLLMWrapper:
    """The judge as RAGAS wants it: the endpoint given in params, else the run's judge the host
    serves for this batch."""
    if not base_url:
        served = judge_endpoint()
        base_url, model, key = served.base_url, served.model, served.api_key
    elif not model:
        raise RecordError("judge_model is required with judge_base_url")
    else:
        key = os.environ.get(key_env, "") if key_env else ""
    return LangchainLLMWrapper(ChatOpenAI(base_url=base_url, model=model, api_key=key or "none"))


async def critic_score(
    question: str, response: str, *, definition: str, llm: LangchainLLMWrapper
) -> float:
    """AspectCritic's verdict (0 or 1) for one case: what the evaluator and the tests call."""
    metric = AspectCritic(name="aspect", definition=definition, llm=llm)
    sample = SingleTurnSample(user_input=question, response=response)
    return float(await metric.single_turn_ascore(sample))


@evaluator(
    name="ragas/aspect-critic", version="0.4.3", output="passed", requires=("input", "output")
)
def aspect_critic(
    record: Any,
    *,
    definition: str,
    judge: str = "default",
    judge_base_url: str = "",
    judge_model: str = "",
    judge_key_env: str = "",
) -> Score:
    """RAGAS's AspectCritic: does the output have the aspect ``definition`` describes (a judge's
    yes or no): the run's judge named ``judge``, or the endpoint at ``judge_base_url``."""
    verdict = asyncio.run(
        critic_score(
            record.input.as_text(),
            record.output.as_text(),
            definition=definition,
            llm=llm(judge_base_url, judge_model, judge_key_env),
        )
    )
    return Score(passed=verdict >= 1.0)


EVALUATORS = (aspect_critic,)

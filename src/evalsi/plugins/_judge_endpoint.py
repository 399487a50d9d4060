"""A run's judge as a plugin's evaluator sees it: an OpenAI-compatible endpoint the host serves
for one batch (``EvaluateRequest.judge``), read with ``judge_endpoint()``.

An evaluator asks for a judge with a ``judge`` param (the run's judge name, ``"default"`` by
the judge evaluators' convention); the host then serves that judge for the batch and sends
where (``_judge_proxy``). The plugin side keeps it in a context variable while the batch is
graded, so the evaluator reads it wherever it runs (a sync evaluator runs in a thread: the
thread gets a copy of the context).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field

from evalsi.evaluators import RecordError

JUDGE_PARAM = "judge"
"""The param by which a plugin's evaluator names the run's judge it wants (as evalsi's own judge
evaluators do)."""


@dataclass(frozen=True, slots=True)
class JudgeEndpoint:
    """Where a plugin's evaluator reaches the run's judge: an OpenAI-compatible base URL (``POST
    {base_url}/chat/completions``), the model to name and the bearer token (``api_key``). Valid
    while the batch runs."""

    name: str
    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)


_ENDPOINT: contextvars.ContextVar[JudgeEndpoint | None] = contextvars.ContextVar(
    "evalsi_plugin_judge", default=None
)


@contextlib.contextmanager
def batch_judge(endpoint: JudgeEndpoint | None) -> Iterator[None]:
    """The plugin side: ``endpoint`` is what ``judge_endpoint()`` answers inside the block."""
    token = _ENDPOINT.set(endpoint)
    try:
        yield
    finally:
        _ENDPOINT.reset(token)


def judge_endpoint() -> JudgeEndpoint:
    """In a plugin's evaluator: the run's judge it named in its ``judge`` param, served by the
    host as an OpenAI-compatible endpoint while this batch runs. Every call through it goes
    through the run's judge layer (cache, budgets, accounting, the judge's own connector).

    Example (in an evaluator with a ``judge: str = "default"`` param)::

        judge = judge_endpoint()
        client = openai.OpenAI(base_url=judge.base_url, api_key=judge.api_key)
        client.chat.completions.create(model=judge.model, messages=[...])

    Raises:
        RecordError: the run has no judge by that name, or the host sent none (the evaluator
            has no ``judge`` param, or the host's evalsi predates judge forwarding); the
            record is ERROR with the reason.
    """
    endpoint = _ENDPOINT.get()
    if endpoint is None:
        raise RecordError(
            "no judge was forwarded to this plugin: give the evaluator a `judge` param naming "
            "one of the run's judges"
        )
    if not endpoint.base_url:
        raise RecordError(
            f"the run has no judge named {endpoint.name!r}: configure it (spec.judges."
            f"{endpoint.name}, evalsi eval --judges FILE, or evalsi.evaluate(judges=...)) or "
            "set the evaluator's judge param to a judge the run has"
        )
    return endpoint

"""An lm-evaluation-harness task as evalsi records: each document's prompt as the harness
builds it for an API model, its target as the reference, and where it came from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from lm_eval.models.openai_completions import LocalChatCompletion

from evalsi_lm_eval._tasks import load_task


def _chat_template() -> Any:
    # The harness's own chat rendering for API models (messages as JSON, nothing tokenised);
    # the model object is never asked anything.
    return LocalChatCompletion(model="-", base_url="http://127.0.0.1:9").apply_chat_template


def records(
    name: str,
    include_path: str = "",
    *,
    num_fewshot: int | None = None,
    limit: int | None = None,
    chat: bool = True,
    fewshot_as_multiturn: bool = True,
    system_instruction: str | None = None,
) -> Iterator[dict[str, Any]]:
    """One record per document, in the task's order. With ``chat`` (lm-eval's
    ``apply_chat_template``, which its chat-completions models require) the input is the list
    of messages the harness sends; without it, the plain prompt a completions model gets."""
    task: Any = load_task(name, include_path, num_fewshot)
    task.build_all_requests(
        limit=limit,
        rank=0,
        world_size=1,
        system_instruction=system_instruction,
        apply_chat_template=chat,
        fewshot_as_multiturn=fewshot_as_multiturn and chat,
        chat_template=_chat_template() if chat else None,
    )
    for instance in sorted(task.instances, key=lambda i: i.doc_id):
        context = instance.args[0]
        prompt = json.loads(context.prompt) if chat else context
        target = task.doc_to_target(instance.doc)
        yield {
            "id": f"{name}/{instance.doc_id}",
            "input": prompt,
            "reference": target if isinstance(target, str) else json.dumps(target),
            "metadata": {"lm_eval_task": name, "lm_eval_doc_id": instance.doc_id},
        }


def target_params(name: str, include_path: str = "") -> dict[str, Any]:
    """The request params the harness's chat model sends for this task (temperature 0 unless
    the task says otherwise; at most four stop sequences), for a run's target."""
    task: Any = load_task(name, include_path)
    kwargs = dict(task.config.generation_kwargs or {})
    params: dict[str, Any] = {
        "temperature": kwargs.get("temperature", 0),
        "max_tokens": kwargs.get("max_gen_toks", 256),
    }
    until = kwargs.get("until")
    if until:
        params["stop"] = ([until] if isinstance(until, str) else list(until))[:4]
    return params

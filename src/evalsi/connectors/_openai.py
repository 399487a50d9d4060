"""OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, Ollama, llama.cpp, LiteLLM…)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import orjson

from evalsi.connectors._chat import ChatModel, malformed, token_count
from evalsi.connectors._secrets import Secret
from evalsi.connectors._types import Completion, estimate_tokens, input_messages
from evalsi.core import JsonValue, Message, ToolCall, Usage


class OpenAICompatible(ChatModel):
    """A chat-completions endpoint.

    ``base_url`` is the API root including its version, as the OpenAI SDKs take it
    (``https://api.openai.com/v1``, ``http://localhost:8000/v1``); requests go to
    ``{base_url}/chat/completions``.

    Example:
        >>> target = OpenAICompatible("http://127.0.0.1:8000/v1", "smollm2",
        ...                           params={"temperature": 0}, api_key=Secret("k", ref="env:K"))
        >>> target
        OpenAICompatible(base_url='http://127.0.0.1:8000/v1', model='smollm2',
                         api_key=Secret('env:K'))
    """

    connector = "openai-compatible"
    supports_seed = True
    _path = "/chat/completions"

    def _auth(self, api_key: Secret) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key.reveal()}"}

    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One chat completion; ``params`` override the constructor's for this call.

        Raises ``InfraError`` after retries are exhausted, ``TargetError`` on a 4xx the user
        must fix.
        """
        chat = input_messages(messages) if isinstance(messages, str) else list(messages)
        merged = {**self.params, **params}
        body: dict[str, Any] = {
            **merged,
            "model": self.model,
            "messages": [_message_to_openai(m) for m in chat],
        }
        if seed is not None:
            body["seed"] = seed
        estimate = estimate_tokens(
            chat, merged.get("max_tokens", merged.get("max_completion_tokens"))
        )
        return await self._post(body, _parse_completion, estimate)


def _message_to_openai(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        if message.content is None:  # llama-cpp-python's server answers 500 to a null here
            out["content"] = ""
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else orjson.dumps(call.arguments).decode(),
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def _parse_completion(data: JsonValue, url: str) -> Completion:
    if not isinstance(data, dict):
        raise malformed(url, "a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed(url, "choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise malformed(url, "choices[0].message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        # Some servers send content parts; keep their text.
        content = (
            "".join(part.get("text", "") for part in content if isinstance(part, dict))
            if isinstance(content, list)
            else str(content)
        )
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            raise malformed(url, "well-formed tool_calls")
        fn = call.get("function") or {}
        arguments: JsonValue = fn.get("arguments")
        if isinstance(arguments, str):
            # A model's malformed arguments are its behaviour: keep them as sent.
            with contextlib.suppress(orjson.JSONDecodeError):
                arguments = orjson.loads(arguments)
        calls.append(
            ToolCall(name=str(fn.get("name", "")), arguments=arguments, id=str(call.get("id", "")))
        )
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    reply = Message(role=str(message.get("role") or "assistant"), content=content, tool_calls=calls)
    return Completion(
        text=content or "",
        messages=[reply],
        usage=Usage(
            input_tokens=token_count(usage.get("prompt_tokens")),
            output_tokens=token_count(usage.get("completion_tokens")),
            total_tokens=token_count(usage.get("total_tokens")),
        ),
        finish_reason=str(choice.get("finish_reason") or ""),
        raw=data,
        model=str(data.get("model") or ""),
    )

"""Anthropic's Messages API: the system prompt apart, content blocks, tool_use / tool_result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.connectors._chat import ChatModel, malformed, token_count, tool_input
from evalsi.connectors._errors import InfraError
from evalsi.connectors._guard import Resilience
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret
from evalsi.connectors._types import Completion, estimate_tokens, input_messages
from evalsi.core import JsonValue, Message, ToolCall, Usage

if TYPE_CHECKING:
    import aiohttp

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
"""The Messages API requires ``max_tokens``; this is sent when ``params`` have none."""


class Anthropic(ChatModel):
    """The Messages API.

    ``base_url`` is the host root (``https://api.anthropic.com``); requests go to
    ``{base_url}/v1/messages`` with the ``x-api-key`` and ``anthropic-version`` headers.
    System messages are joined into the top-level ``system`` field; assistant tool calls become
    ``tool_use`` blocks and ``tool`` messages become ``tool_result`` blocks in a user turn.
    The API takes no seed: ``seed`` is accepted and not sent (``supports_seed`` is False).

    Example:
        >>> Anthropic("https://api.anthropic.com", "claude-x", api_key=Secret("k", ref="file:/k"))
        Anthropic(base_url='https://api.anthropic.com', model='claude-x', api_key=Secret('file:/k'))
    """

    connector = "anthropic"
    supports_seed = False
    _path = "/v1/messages"

    def __init__(
        self,
        base_url: str,
        model: str,
        params: Mapping[str, Any] | None = None,
        *,
        api_key: Secret | str | None = None,
        timeout: float = 120.0,
        system: str | None = None,
        version: str = ANTHROPIC_VERSION,
        headers: Mapping[str, str] | None = None,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.version = version
        super().__init__(
            base_url, model, params, api_key=api_key, timeout=timeout, system=system,
            headers={"anthropic-version": version, **(headers or {})}, rate_limits=rate_limits,
            resilience=resilience, session=session,
        )  # fmt: skip

    def _auth(self, api_key: Secret) -> dict[str, str]:
        return {"x-api-key": api_key.reveal()}

    def _describe_extra(self) -> dict[str, Any]:
        return {"version": self.version}

    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One Messages API call; ``params`` override the constructor's for this call."""
        del seed  # not part of the Messages API
        chat = input_messages(messages) if isinstance(messages, str) else list(messages)
        merged = {**self.params, **params}
        merged.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        system, turns = _to_anthropic(chat)
        body: dict[str, Any] = {**merged, "model": self.model, "messages": turns}
        if system:
            body["system"] = system
        estimate = estimate_tokens(chat, merged.get("max_tokens"))
        return await self._post(body, _parse_message, estimate)


def _to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, alternating user/assistant turns with content blocks)."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system_parts.append(message.content)
            continue
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            role = "user"
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content or "",
                }
            )
        else:
            role = "assistant" if message.role == "assistant" else "user"
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(call.arguments),
                    }
                )
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # the API wants roles to alternate
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system_parts), turns


def _parse_message(data: JsonValue, url: str) -> Completion:
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise malformed(url, "a content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        if not isinstance(block, dict):
            raise InfraError("malformed_response", f"{url} sent a bad content block", endpoint=url)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    name=str(block.get("name", "")),
                    arguments=block.get("input"),
                    id=str(block.get("id", "")),
                )
            )
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    input_tokens = token_count(usage.get("input_tokens"))
    output_tokens = token_count(usage.get("output_tokens"))
    text = "".join(texts)
    return Completion(
        text=text,
        messages=[Message(role="assistant", content=text or None, tool_calls=calls)],
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=None
            if input_tokens is None and output_tokens is None
            else (input_tokens or 0) + (output_tokens or 0),
        ),
        finish_reason=str(data.get("stop_reason") or ""),
        raw=data,
        model=str(data.get("model") or ""),
    )

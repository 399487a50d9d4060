"""Google Gemini's Generative Language API: ``contents`` of ``parts``, ``functionCall`` /
``functionResponse`` parts, ``systemInstruction`` and ``generationConfig``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from evalsi.connectors._chat import ChatModel, function_tools, malformed, token_count, tool_input
from evalsi.connectors._errors import InfraError
from evalsi.connectors._guard import Resilience
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret
from evalsi.connectors._types import Completion, estimate_tokens, input_messages
from evalsi.core import JsonValue, Message, ToolCall, Usage

if TYPE_CHECKING:
    import aiohttp

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
GEMINI_API_VERSION = "v1beta"

# Request fields that stay at the top level; any other param is a generationConfig field.
_TOP_LEVEL = frozenset(
    {"tools", "toolConfig", "safetySettings", "generationConfig", "cachedContent", "labels"}
)
# The spellings the other connectors take, so a judge's params read the same everywhere.
_ALIASES = {
    "max_tokens": "maxOutputTokens",
    "max_output_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "stop": "stopSequences",
    "stop_sequences": "stopSequences",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "response_mime_type": "responseMimeType",
}


class Gemini(ChatModel):
    """``models/{model}:generateContent``.

    ``base_url`` is the host root (``https://generativelanguage.googleapis.com`` when empty in a
    spec) and ``api_version`` its path version (``v1beta``, which has tools and system
    instructions); the key travels in ``x-goog-api-key`` (``bearer=True``: an OAuth access token
    in ``Authorization: Bearer``). System messages become
    ``systemInstruction``; ``params`` other than request fields (``tools``, ``toolConfig``,
    ``safetySettings``...) go in ``generationConfig``, with ``max_tokens``, ``top_p``, ``stop``
    accepted for ``maxOutputTokens``, ``topP``, ``stopSequences``. Tools in the OpenAI shape
    become ``functionDeclarations`` (the schema as ``parametersJsonSchema``); the seed is sent
    as ``generationConfig.seed``.

    Gemini may send a function call without an id; the connector then names it
    ``{name}-{n}`` (n counting the calls of the reply) so a tool message can answer it, and
    finds the function's name for a ``functionResponse`` from the call its id answers.

    Example:
        >>> Gemini(GEMINI_BASE_URL, "gemini-2.5-flash", api_key=Secret("k", ref="env:GEMINI_API_KEY"))
        Gemini(base_url='https://generativelanguage.googleapis.com', model='gemini-2.5-flash', api_key=Secret('env:GEMINI_API_KEY'))
    """  # noqa: E501

    connector = "gemini"
    supports_seed = True

    def __init__(
        self,
        base_url: str,
        model: str,
        params: Mapping[str, Any] | None = None,
        *,
        api_key: Secret | str | None = None,
        api_version: str = GEMINI_API_VERSION,
        bearer: bool = False,
        timeout: float = 120.0,
        system: str | None = None,
        headers: Mapping[str, str] | None = None,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.api_version = api_version or GEMINI_API_VERSION
        self.bearer = bearer
        super().__init__(
            base_url or GEMINI_BASE_URL, model, params, api_key=api_key, timeout=timeout,
            system=system, headers=headers, rate_limits=rate_limits, resilience=resilience,
            session=session,
        )  # fmt: skip
        name = model.removeprefix("models/")
        self._url = (
            f"{self.base_url}/{self.api_version}/models/{quote(name, safe='')}:generateContent"
        )

    def _auth(self, api_key: Secret) -> dict[str, str]:
        if self.bearer:  # a Google OAuth access token (gcloud auth print-access-token)
            return {"Authorization": f"Bearer {api_key.reveal()}"}
        return {"x-goog-api-key": api_key.reveal()}

    def _describe_extra(self) -> dict[str, Any]:
        return {"api_version": self.api_version}

    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One ``generateContent`` call; ``params`` override the constructor's for this call."""
        chat = input_messages(messages) if isinstance(messages, str) else list(messages)
        merged = {**self.params, **params}
        body = gemini_request(chat, merged, seed=seed)
        config = body.get("generationConfig") or {}
        estimate = estimate_tokens(chat, config.get("maxOutputTokens"))
        return await self._post(body, parse_gemini, estimate)


def gemini_request(
    messages: list[Message], params: Mapping[str, Any], *, seed: int | None = None
) -> dict[str, Any]:
    """The ``generateContent`` body for ``messages`` and ``params``."""
    body: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for key, value in params.items():
        if key in _TOP_LEVEL:
            body[key] = value
        else:
            config[_ALIASES.get(key, key)] = value
    if isinstance(body.get("generationConfig"), dict):
        config = {**body["generationConfig"], **config}
    if isinstance(config.get("stopSequences"), str):
        config["stopSequences"] = [config["stopSequences"]]
    if seed is not None:
        config["seed"] = seed
    if config:
        body["generationConfig"] = config
    declared = function_tools(body.get("tools"))
    if declared is not None:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {"name": name, "description": text, "parametersJsonSchema": schema}
                    for name, text, schema in declared
                ]
            }
        ]
    system, contents = to_gemini(messages)
    body["contents"] = contents
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def to_gemini(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, ``contents`` alternating ``user`` / ``model`` turns)."""
    system_parts: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, for functionResponse
    for message in messages:
        if message.role == "system":
            if message.content:
                system_parts.append(message.content)
            continue
        parts: list[dict[str, Any]] = []
        if message.role == "tool":
            role = "user"
            name = message.name or names.get(message.tool_call_id or "", "")
            response: dict[str, Any] = {
                "name": name,
                "response": _tool_response(message.content),
            }
            if message.tool_call_id and not _made_up_id(message.tool_call_id, name):
                response["id"] = message.tool_call_id
            parts.append({"functionResponse": response})
        else:
            role = "model" if message.role == "assistant" else "user"
            if message.content:
                parts.append({"text": message.content})
            for call in message.tool_calls:
                names[call.id] = call.name
                function: dict[str, Any] = {"name": call.name, "args": tool_input(call.arguments)}
                if call.id and not _made_up_id(call.id, call.name):
                    function["id"] = call.id
                parts.append({"functionCall": function})
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)  # parallel tool results share one turn
        else:
            contents.append({"role": role, "parts": parts})
    return "\n\n".join(system_parts), contents


def _tool_response(content: str | None) -> dict[str, Any]:
    """A tool's result as the object ``functionResponse.response`` must be: a JSON object as
    it is, anything else under ``result``."""
    value: Any = content or ""
    with contextlib.suppress(orjson.JSONDecodeError):
        value = orjson.loads(value) if value else ""
    return value if isinstance(value, dict) else {"result": value}


def _made_up_id(call_id: str, name: str) -> bool:
    """Whether ``call_id`` is one this connector gave an id-less call (not Gemini's own)."""
    prefix, _, n = call_id.rpartition("-")
    return prefix == name and n.isdigit()


def parse_gemini(data: JsonValue, url: str) -> Completion:
    """A ``generateContent`` reply as a ``Completion``. A prompt the API blocked is an answer
    (empty, its ``blockReason`` the finish reason), not an error: it is the model's behaviour."""
    if not isinstance(data, dict):
        raise malformed(url, "a JSON object")
    usage = data.get("usageMetadata")
    if not isinstance(usage, dict):
        usage = {}
    candidates = data.get("candidates")
    texts: list[str] = []
    calls: list[ToolCall] = []
    if isinstance(candidates, list) and candidates:
        candidate = candidates[0]
        if not isinstance(candidate, dict):
            raise malformed(url, "candidates[0]")
        finish = str(candidate.get("finishReason") or "")
        content = candidate.get("content") or {}
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts or ():
            if not isinstance(part, dict):
                raise InfraError("malformed_response", f"{url} sent a bad part", endpoint=url)
            if "text" in part and not part.get("thought"):
                texts.append(str(part["text"]))
            elif isinstance(part.get("functionCall"), dict):
                fn = part["functionCall"]
                name = str(fn.get("name", ""))
                calls.append(
                    ToolCall(
                        name=name,
                        arguments=fn.get("args") if fn.get("args") is not None else {},
                        id=str(fn.get("id") or f"{name}-{len(calls)}"),
                    )
                )
    else:
        feedback = data.get("promptFeedback")
        if not isinstance(feedback, dict) or not feedback.get("blockReason"):
            raise malformed(url, "candidates")
        finish = str(feedback["blockReason"])
    text = "".join(texts)
    return Completion(
        text=text,
        messages=[Message(role="assistant", content=text or None, tool_calls=calls)],
        usage=Usage(
            input_tokens=token_count(usage.get("promptTokenCount")),
            output_tokens=_output_tokens(usage),
            total_tokens=token_count(usage.get("totalTokenCount")),
        ),
        finish_reason=finish,
        raw=data,
        model=str(data.get("modelVersion") or ""),
    )


def _output_tokens(usage: dict[str, Any]) -> int | None:
    """Tokens the reply cost: its candidates and, for a thinking model, its thoughts (billed
    as output too)."""
    answer = token_count(usage.get("candidatesTokenCount"))
    thoughts = token_count(usage.get("thoughtsTokenCount"))
    if thoughts is None:
        return answer
    return (answer or 0) + thoughts

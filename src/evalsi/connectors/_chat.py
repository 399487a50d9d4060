"""What the chat-model connectors share: identity, a safe repr, and ``invoke`` over ``complete``.

Subclasses name their endpoint (``_path``) and key headers (``_auth``) and implement
``complete``; the base adds nothing to the wire format, which stays each provider's own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.connectors._errors import InfraError
from evalsi.connectors._guard import Resilience, default_resilience, guarded_call
from evalsi.connectors._http import request_json, shared_session
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret, as_secret
from evalsi.connectors._types import Completion, InputLike, TargetOutput, input_messages
from evalsi.core import JsonValue, Message

if TYPE_CHECKING:
    import aiohttp


class ChatModel(ABC):
    """Base of the chat-model connectors (``OpenAICompatible``, ``Anthropic``, ``AzureOpenAI``,
    ``Gemini``, ``Bedrock``)."""

    connector = ""
    supports_seed: bool
    base_url: str
    model: str
    params: dict[str, Any]
    api_key: Secret | None
    system: str | None
    timeout: float
    rate_limits: RateLimits | None
    resilience: Resilience | None
    _session: aiohttp.ClientSession | None
    _url: str
    _headers: dict[str, str]
    _secrets: tuple[Secret, ...]
    _key_id: str
    _path = ""  # the endpoint below base_url

    def __init__(
        self,
        base_url: str,
        model: str,
        params: Mapping[str, Any] | None = None,
        *,
        api_key: Secret | str | None = None,
        timeout: float = 120.0,
        system: str | None = None,
        headers: Mapping[str, str] | None = None,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        api_key = as_secret(api_key)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.params = dict(params or {})
        self.api_key = api_key
        self.timeout = timeout
        self.system = system
        self.rate_limits = rate_limits
        self.resilience = resilience
        self._session = session
        self._url = f"{self.base_url}{self._path}"
        self._headers = dict(headers or {})
        if api_key is not None:
            self._headers.update(self._auth(api_key))
        self._secrets = (api_key,) if api_key is not None else ()
        self._key_id = api_key.ref if api_key is not None else ""

    @abstractmethod
    def _auth(self, api_key: Secret) -> dict[str, str]:
        """The headers that carry the key (added after the caller's)."""

    def __repr__(self) -> str:  # the key is shown by reference only, never revealed
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={self.api_key!r})"
        )

    def describe(self) -> dict[str, Any]:
        """The identity recorded in manifests (secret references, never secrets)."""
        return {
            "connector": self.connector,
            "base_url": self.base_url,
            "model": self.model,
            "params": self.params,
            **self._describe_extra(),
            "secret_ref": self.api_key.ref if self.api_key is not None else None,
        }

    def _describe_extra(self) -> dict[str, Any]:
        return {}

    _encoded_url = False  # True: ``_url`` is sent exactly as written (a signature covers it)

    def _request(self, body: dict[str, Any]) -> tuple[dict[str, Any] | bytes, dict[str, str]]:
        """The payload and headers of one attempt; a connector that signs each request
        (Bedrock's SigV4) overrides it, so every retry is signed afresh."""
        return body, self._headers

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        messages = input_messages(input, system=self.system)
        return (await self.complete(messages, seed=seed)).to_output()

    async def _post(
        self, body: dict[str, Any], parse: Callable[[Any, str], Completion], estimate: int
    ) -> Completion:
        """POST ``body`` to the endpoint under the run's resilience (rate limits, breaker,
        retries) and ``parse`` the JSON reply; usage gets the call's latency."""

        resilience = self.resilience or default_resilience()

        async def call() -> tuple[Completion, int | None]:
            session = self._session or await shared_session(egress=resilience.egress)
            payload, headers = self._request(body)
            reply = await request_json(
                session,
                "POST",
                self._url,
                body=payload,
                headers=headers,
                timeout=self.timeout,
                secrets=self._secrets,
                encoded=self._encoded_url,
            )
            completion = parse(reply.data, self._url)
            completion.usage.latency_ms = reply.latency_ms
            return completion, completion.usage.tokens()

        completion, attempts = await guarded_call(
            resilience,
            call,
            endpoint=self.base_url,
            rate_key=(self.connector, self.model, self._key_id),
            rate_limits=self.rate_limits,
            token_estimate=estimate,
        )
        completion.attempts = attempts
        return completion

    @abstractmethod
    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One call to the model; ``params`` override the constructor's for this call."""


def malformed(url: str, what: str) -> InfraError:
    """A reply the parser cannot read: ``{url} answered without {what}``."""
    return InfraError("malformed_response", f"{url} answered without {what}", endpoint=url)


def token_count(value: object) -> int | None:
    """A usage count from a reply: an int (not a bool), else unknown."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def tool_input(arguments: JsonValue) -> dict[str, Any]:
    """A tool call's arguments as the JSON object the Anthropic, Gemini and Bedrock APIs want:
    a JSON string is decoded, text that is not JSON is kept under ``input``."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {"input": arguments}
    return arguments if isinstance(arguments, dict) else {}


def function_tools(tools: object) -> list[tuple[str, str, dict[str, Any]]] | None:
    """(name, description, JSON Schema) of each tool when ``tools`` is in the OpenAI shape
    (``{"type": "function", "function": {...}}``, what the agent loop sends), else None (the
    provider's own shape, passed through)."""
    if not isinstance(tools, list) or not tools:
        return None
    out: list[tuple[str, str, dict[str, Any]]] = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function":
            return None
        schema = fn.get("parameters")
        out.append(
            (
                str(fn.get("name", "")),
                str(fn.get("description") or ""),
                dict(schema) if isinstance(schema, dict) else {"type": "object"},
            )
        )
    return out

"""A generic HTTP service as the target: a JSON body template in, one JSONPath out.

The template is JSON with ``{{input}}`` placeholders (also ``{{seed}}``, the trial's seed, and
``{{name}}`` / ``{{name.key}}`` for the extra ``variables``). Substitution walks the JSON
structure, never the text: a string that is exactly one placeholder takes the value with its
type (a list of messages stays a list); a placeholder inside a longer string is replaced by the
value's text. Nothing a sample contains can change the shape of the request. The URL may hold
placeholders too (URL-encoded).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from evalsi.connectors._errors import InfraError, TargetError
from evalsi.connectors._guard import Resilience, default_resilience, guarded_call
from evalsi.connectors._http import MAX_BODY_BYTES, public_url, request_json, shared_session
from evalsi.connectors._jsonpath import JsonPath, JsonPathMiss
from evalsi.connectors._python import to_content
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret
from evalsi.connectors._types import InputLike, TargetOutput, plain_input
from evalsi.core import Content, JsonValue, Usage, UserError

if TYPE_CHECKING:
    import aiohttp

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\-]+)*)\s*\}\}")
_BODYLESS = frozenset({"GET", "HEAD", "DELETE"})


def placeholders(template: JsonValue) -> set[str]:
    """Every placeholder expression in a template (values only, keys are literal)."""
    found: set[str] = set()
    if isinstance(template, str):
        found.update(m.group(1) for m in _PLACEHOLDER.finditer(template))
    elif isinstance(template, list):
        for item in template:
            found |= placeholders(item)
    elif isinstance(template, dict):
        for item in template.values():
            found |= placeholders(item)
    return found


def render(template: JsonValue, variables: Mapping[str, JsonValue]) -> JsonValue:
    """Substitute placeholders by walking ``template``.

    Example:
        >>> render({"q": "{{input}}", "n": 2, "note": "Q: {{ input }}!"}, {"input": "2+2"})
        {'q': '2+2', 'n': 2, 'note': 'Q: 2+2!'}
        >>> render({"messages": "{{input}}"}, {"input": [{"role": "user", "content": "hi"}]})
        {'messages': [{'role': 'user', 'content': 'hi'}]}
    """
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template.strip())
        if whole is not None:
            return _lookup(whole.group(1), variables)
        return _PLACEHOLDER.sub(lambda m: _as_text(_lookup(m.group(1), variables)), template)
    if isinstance(template, list):
        return [render(item, variables) for item in template]
    if isinstance(template, dict):
        return {key: render(value, variables) for key, value in template.items()}
    return template


def _lookup(expression: str, variables: Mapping[str, JsonValue]) -> JsonValue:
    root, *rest = expression.split(".")
    if root not in variables:
        raise UserError(f"template placeholder {{{{{expression}}}}} names no variable")
    value = variables[root]
    for key in rest:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif (
            isinstance(value, list)
            and key.lstrip("-").isdigit()
            and -len(value) <= int(key) < len(value)
        ):
            value = value[int(key)]
        else:
            raise TargetError(f"template placeholder {{{{{expression}}}}}: no {key!r} in the value")
    return value


def _as_text(value: JsonValue) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


class HttpTarget:
    """POST (or any method) a rendered JSON body; the output is what ``output`` points to.

    ``output=None`` takes the whole reply: its JSON, or its text when it is not JSON.

    Example:
        >>> HttpTarget("http://svc/answer", body={"question": "{{input}}"}, output="$.answer")
        HttpTarget('POST', 'http://svc/answer', output='$.answer')
    """

    connector = "http"

    def __init__(
        self,
        url: str,
        *,
        method: str = "POST",
        body: JsonValue = None,
        output: str | None = None,
        headers: Mapping[str, str | Secret] | None = None,
        variables: Mapping[str, JsonValue] | None = None,
        timeout: float = 120.0,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.method = method.upper()
        self.body = body
        self.output_path = JsonPath(output) if output is not None else None
        self.variables: dict[str, JsonValue] = dict(variables or {})
        self.timeout = timeout
        self.rate_limits = rate_limits
        self.resilience = resilience
        self._session = session
        self._headers_template = dict(headers or {})
        if body is not None and self.method in _BODYLESS:
            raise UserError(
                f"http target {public_url(url)}: a {self.method} request carries no body",
                hint="use POST, or put {{input}} in the URL",
            )
        allowed = {"input", "seed", *self.variables}
        named = placeholders(body) | placeholders(url)
        roots = {name.split(".", 1)[0] for name in named}
        unknown = sorted(name for name in named if name.split(".", 1)[0] not in allowed)
        # The trial's seed reaches the service only where the template asks for it.
        self.supports_seed = "seed" in roots and "seed" not in self.variables
        if unknown:
            raise UserError(
                f"http target {public_url(url)}: unknown template placeholder(s) "
                + ", ".join("{{" + name + "}}" for name in unknown),
                hint="available: " + ", ".join("{{" + name + "}}" for name in sorted(allowed)),
            )
        self._endpoint = public_url(url)
        self._secrets = tuple(v for v in self._headers_template.values() if isinstance(v, Secret))
        self._key_id = ",".join(s.ref for s in self._secrets)

    def __repr__(self) -> str:
        path = str(self.output_path) if self.output_path is not None else None
        return f"HttpTarget({self.method!r}, {self._endpoint!r}, output={path!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "url": self._endpoint,
            "method": self.method,
            "body": self.body,
            "output": str(self.output_path) if self.output_path is not None else None,
            "secret_refs": [s.ref for s in self._secrets],
        }

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        variables = {"seed": seed, **self.variables, "input": plain_input(input)}
        url = _PLACEHOLDER.sub(
            lambda m: quote(_as_text(_lookup(m.group(1), variables)), safe=""), self.url
        )
        body = render(self.body, variables) if self.body is not None else None
        headers = {
            name: value.reveal() if isinstance(value, Secret) else value
            for name, value in self._headers_template.items()
        }
        resilience = self.resilience or default_resilience()

        async def call() -> tuple[TargetOutput, int | None]:
            session = self._session or await shared_session(egress=resilience.egress)
            reply = await request_json(
                session,
                self.method,
                url,
                body=body,
                headers=headers,
                timeout=self.timeout,
                secrets=self._secrets,
                parse=False,
                max_bytes=self.max_bytes,
            )
            raw: bytes = reply.data
            output, decoded = self._extract(raw)
            return TargetOutput(output, Usage(latency_ms=reply.latency_ms), raw=decoded), None

        result, attempts = await guarded_call(
            resilience,
            call,
            endpoint=self._endpoint,
            rate_key=(self.connector, self._endpoint, self._key_id),
            rate_limits=self.rate_limits,
        )
        result.attempts = attempts
        return result

    def _extract(self, raw: bytes) -> tuple[Content, JsonValue]:
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            if self.output_path is None:
                text = raw.decode("utf-8", "replace")
                return Content.of_text(text), text
            raise InfraError(
                "malformed_response",
                f"{self._endpoint} answered with a body that is not JSON, so "
                f"{self.output_path} cannot be read",
                endpoint=self._endpoint,
            ) from e
        if self.output_path is None:
            return to_content(decoded), decoded
        try:
            value = self.output_path.find(decoded)
        except JsonPathMiss as e:
            raise TargetError(
                f"{self._endpoint}: output path {self.output_path} does not match the reply: {e}",
                endpoint=self._endpoint,
                hint="check the target's output path against a real reply",
            ) from e
        return to_content(value), decoded

"""AWS Bedrock's Converse API, each request signed with SigV4 by botocore.

botocore signs (``SigV4Auth`` over the exact URL, headers and bytes sent) and reads the
credentials (its default chain: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN``, then ``AWS_PROFILE`` and the shared files, SSO, instance roles); the request
itself goes through the connectors' aiohttp session, so retries, rate limits, the breaker and
the egress policy are the other connectors'. botocore is the ``bedrock`` extra.
"""

from __future__ import annotations

import functools
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
from evalsi.core import JsonValue, Message, ToolCall, Usage, UserError

if TYPE_CHECKING:
    import aiohttp
    from botocore.credentials import Credentials

SIGNING_NAME = "bedrock"  # the service name in the credential scope (not bedrock-runtime)

_INFERENCE = {"maxTokens", "temperature", "topP", "stopSequences"}
_ALIASES = {"max_tokens": "maxTokens", "top_p": "topP", "stop": "stopSequences"}
_TOP_LEVEL = frozenset(
    {
        "toolConfig",
        "guardrailConfig",
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "promptVariables",
        "requestMetadata",
        "performanceConfig",
        "inferenceConfig",
    }
)


class Bedrock(ChatModel):
    """``POST /model/{modelId}/converse`` on ``bedrock-runtime.{region}.amazonaws.com``.

    ``region`` is required (it is part of the signature); ``base_url`` defaults to the region's
    runtime endpoint (give one for a VPC endpoint or a proxy). Every attempt is signed afresh
    with SigV4 from botocore's credential chain; an ``api_key`` (a Bedrock API key) is sent as
    ``Authorization: Bearer`` instead of signing. System messages become ``system`` blocks;
    ``max_tokens``, ``temperature``, ``top_p``, ``stop`` go in ``inferenceConfig``, Converse's
    own request fields (``toolConfig``, ``guardrailConfig``...) stay top level and any other
    param goes in ``additionalModelRequestFields`` (the model's own, e.g. ``top_k``). Tools in
    the OpenAI shape become ``toolConfig.tools[].toolSpec``. Converse takes no seed.

    Example:
        >>> Bedrock("", "anthropic.claude-3-haiku-20240307-v1:0", region="eu-west-1",
        ...         api_key=Secret("k", ref="env:AWS_BEARER_TOKEN_BEDROCK")).base_url
        'https://bedrock-runtime.eu-west-1.amazonaws.com'
    """

    connector = "bedrock"
    supports_seed = False
    _encoded_url = True  # the path is signed as it is written

    def __init__(
        self,
        base_url: str,
        model: str,
        params: Mapping[str, Any] | None = None,
        *,
        region: str,
        api_key: Secret | str | None = None,
        credentials: Credentials | None = None,
        timeout: float = 120.0,
        system: str | None = None,
        headers: Mapping[str, str] | None = None,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        problem = bedrock_region_problem(region)
        if problem:
            raise UserError(f"region: {problem}", hint="e.g. region: us-east-1")
        self.region = region
        super().__init__(
            base_url or runtime_endpoint(region), model, params, api_key=api_key,
            timeout=timeout, system=system, headers=headers, rate_limits=rate_limits,
            resilience=resilience, session=session,
        )  # fmt: skip
        # Model ids and ARNs hold ':' and '/': one path segment, percent-encoded (as botocore).
        self._url = f"{self.base_url}/model/{quote(model, safe='')}/converse"
        self._credentials = None if api_key is not None else (credentials or _credentials())

    def _auth(self, api_key: Secret) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key.reveal()}"}

    def _describe_extra(self) -> dict[str, Any]:
        return {"region": self.region}

    def _request(self, body: dict[str, Any]) -> tuple[dict[str, Any] | bytes, dict[str, str]]:
        if self._credentials is None:
            return body, self._headers
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        payload = orjson.dumps(body)
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=payload,
            headers={**self._headers, "Content-Type": "application/json"},
        )
        # Frozen per attempt: refreshable credentials (SSO, roles) rotate between attempts.
        frozen = self._credentials.get_frozen_credentials()
        SigV4Auth(frozen, SIGNING_NAME, self.region).add_auth(request)
        return payload, dict(request.headers.items())

    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One Converse call; ``params`` override the constructor's for this call."""
        del seed  # Converse has no seed
        chat = input_messages(messages) if isinstance(messages, str) else list(messages)
        body = converse_request(chat, {**self.params, **params})
        estimate = estimate_tokens(chat, body.get("inferenceConfig", {}).get("maxTokens"))
        model = self.model

        def parse(data: JsonValue, url: str) -> Completion:
            return parse_converse(data, url, model=model)

        return await self._post(body, parse, estimate)


def converse_request(messages: list[Message], params: Mapping[str, Any]) -> dict[str, Any]:
    """The Converse body for ``messages`` and ``params``."""
    body: dict[str, Any] = {}
    inference: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    tools: object = None
    for key, value in params.items():
        name = _ALIASES.get(key, key)
        if key == "tools":
            tools = value
        elif name in _INFERENCE:
            inference[name] = value
        elif key in _TOP_LEVEL:
            body[key] = value
        else:
            extra[key] = value
    if isinstance(body.get("inferenceConfig"), dict):
        inference = {**body["inferenceConfig"], **inference}
    if isinstance(inference.get("stopSequences"), str):
        inference["stopSequences"] = [inference["stopSequences"]]
    if inference:
        body["inferenceConfig"] = inference
    if extra:
        own = body.get("additionalModelRequestFields") or {}
        body["additionalModelRequestFields"] = {**own, **extra}
    declared = function_tools(tools)
    if declared is not None:
        specs = [
            {"toolSpec": {"name": n, "description": d or n, "inputSchema": {"json": schema}}}
            for n, d, schema in declared
        ]
        body["toolConfig"] = {**body.get("toolConfig", {}), "tools": specs}
    elif isinstance(tools, list) and tools:  # Converse's own shape
        body["toolConfig"] = {**body.get("toolConfig", {}), "tools": tools}
    system, turns = to_converse(messages)
    body["messages"] = turns
    if system:
        body["system"] = [{"text": text} for text in system]
    return body


def to_converse(messages: list[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, alternating user/assistant ``messages`` of content blocks)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            role = "user"
            blocks.append(
                {
                    "toolResult": {
                        "toolUseId": message.tool_call_id or "",
                        "content": [_result_block(message.content)],
                    }
                }
            )
        else:
            role = "assistant" if message.role == "assistant" else "user"
            if message.content:
                blocks.append({"text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {
                        "toolUse": {
                            "toolUseId": call.id,
                            "name": call.name,
                            "input": tool_input(call.arguments),
                        }
                    }
                )
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # Converse wants roles to alternate
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _result_block(content: str | None) -> dict[str, Any]:
    """A tool result's content block: a JSON object as ``json``, anything else as ``text``."""
    try:
        value = orjson.loads(content or "")
    except orjson.JSONDecodeError:
        return {"text": content or ""}
    return {"json": value} if isinstance(value, dict) else {"text": content or ""}


def parse_converse(data: JsonValue, url: str, *, model: str = "") -> Completion:
    """A Converse reply as a ``Completion`` (Converse does not name the model: ``model``)."""
    if not isinstance(data, dict):
        raise malformed(url, "a JSON object")
    output = data.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise malformed(url, "output.message.content")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message["content"]:
        if not isinstance(block, dict):
            raise InfraError("malformed_response", f"{url} sent a bad content block", endpoint=url)
        if "text" in block:
            texts.append(str(block["text"]))
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(
                ToolCall(
                    name=str(use.get("name", "")),
                    arguments=use.get("input"),
                    id=str(use.get("toolUseId", "")),
                )
            )
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    text = "".join(texts)
    return Completion(
        text=text,
        messages=[Message(role="assistant", content=text or None, tool_calls=calls)],
        usage=Usage(
            input_tokens=token_count(usage.get("inputTokens")),
            output_tokens=token_count(usage.get("outputTokens")),
            total_tokens=token_count(usage.get("totalTokens")),
        ),
        finish_reason=str(data.get("stopReason") or ""),
        raw=data,
        model=model,
    )


@functools.cache
def _partitions() -> tuple[tuple[frozenset[str], str], ...]:
    """(regions, DNS suffix) of each AWS partition, from botocore's own data."""
    loader = _botocore().loaders.create_loader()
    return tuple(
        (frozenset(p.get("regions", {})), str(p.get("outputs", {}).get("dnsSuffix", "")))
        for p in loader.load_data("partitions")["partitions"]
    )


def bedrock_region_problem(region: str) -> str | None:
    """What is wrong with an AWS region name, or None: it must be one botocore knows."""
    if not region:
        return "Bedrock needs the AWS region (it is part of the request's signature)"
    if not any(region in regions for regions, _ in _partitions()):
        return f"unknown AWS region {region!r}"
    return None


def runtime_endpoint(region: str) -> str:
    """The Bedrock runtime endpoint of ``region`` (its partition's DNS suffix)."""
    suffix = next((s for regions, s in _partitions() if region in regions), "amazonaws.com")
    return f"https://bedrock-runtime.{region}.{suffix}"


def _credentials() -> Credentials:
    """botocore's credential chain, resolved once; none found is a ``UserError``."""
    credentials = _botocore().session.Session().get_credentials()
    if credentials is None:
        raise UserError(
            "no AWS credentials for Bedrock",
            hint="export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), "
            "set AWS_PROFILE, or give a Bedrock API key as secretRef",
        )
    return credentials


def _botocore() -> Any:
    try:
        import botocore.loaders
        import botocore.session
    except ImportError as e:
        raise UserError(
            "the bedrock connector needs botocore", hint="pip install 'evalsi[bedrock]'"
        ) from e
    return botocore

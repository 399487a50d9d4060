"""From a run's ``TargetSpec`` to a connector, and from a sample to what the target is sent.

Model targets get the sample's input as chat messages (text becomes one user message, chat
messages go as they are); an optional Jinja2 ``template`` over ``input`` and ``metadata``
replaces it with the rendered text (sandboxed environment, undefined names are errors, no
autoescape: this is a prompt, not HTML). ``system`` is prepended by the connector. Python and
HTTP targets receive the same (rendered when templated) input as plain data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from evalsi.connectors import (
    HttpTarget,
    InputLike,
    PythonTarget,
    RateLimits,
    Resilience,
    Target,
    chat_model,
    plain_input,
    resolve_secret,
)
from evalsi.core import Content, Record, UserError
from evalsi.specs import EnvironmentSpec, TargetSpec

if TYPE_CHECKING:
    from evalsi.agents import RemoteHarness, Replay

Render = Callable[[Record], InputLike]

CLOSED_API_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "api.mistral.ai",
    "api.groq.com",
    "api.together.xyz",
    ".openai.azure.com",
    ".amazonaws.com",  # Bedrock's runtime endpoints
    ".amazonaws.com.cn",
)


class RenderError(Exception):
    """The sample cannot become a request (no input, or the template failed on it)."""


def build_target(
    spec: TargetSpec,
    *,
    resilience: Resilience | None = None,
    environment: EnvironmentSpec | None = None,
    remote: RemoteHarness | None = None,
    replay: Replay | None = None,
) -> Target:
    """The connector for ``spec`` (resolves the secret; makes no call). An agent target is an
    async context manager: its tools start when it is entered; ``remote`` connects a harness in
    another process (the entry point's gRPC client)."""
    limits = None
    if spec.requests_per_minute is not None or spec.tokens_per_minute is not None:
        limits = RateLimits(spec.requests_per_minute, spec.tokens_per_minute)
    if spec.kind == "agent":
        if spec.agent is None:
            raise UserError("target.agent: missing")
        from evalsi.agents import AgentTarget
        from evalsi.runs._pricing import costing, price
        from evalsi.runs._user_sim import build_user_simulator

        egress = resilience.egress if resilience is not None else None
        u = spec.agent.user
        if u is not None and replay is not None and replay.live_after is None:
            u = replace(u, secret_ref="")  # its every call replayed too
        user = build_user_simulator(u, resilience=resilience) if u is not None else None
        if spec.agent.harness is not None or spec.agent.kind != "builtin":
            return AgentTarget(
                None,
                spec.agent,
                environment,
                egress=egress,
                remote=remote,
                replay=replay,
                user=user,
                resilience=resilience,
            )
        if environment is None:
            raise UserError("target.agent: an agent needs spec.environment.tools")
        if spec.agent.max_usd is not None and price(spec.model) is None:
            raise UserError(  # a budget that cannot be counted would silently never stop it
                f"spec.target.agent.maxUsd: no price for model {spec.model!r}, so spend "
                "cannot be counted",
                hint="add the model to a pricing file named by EVALSI_PRICING, or use maxTokens",
            )
        if spec.connector == "scripted":  # no model: each task plays its sample's known trajectory
            from evalsi.agents import ScriptedModel

            return AgentTarget(
                ScriptedModel(spec.model),
                spec.agent,
                environment,
                egress=egress,
                replay=replay,
                user=user,
                resilience=resilience,
            )
        # Every model call replayed: no key needed (CI replays without the secret).
        secret = "" if replay is not None and replay.live_after is None else spec.secret_ref
        model_spec = replace(spec, kind="model", agent=None, secret_ref=secret)
        model = build_target(model_spec, resilience=resilience)
        return AgentTarget(
            model,  # type: ignore[arg-type]
            spec.agent,
            environment,
            price=costing(),
            egress=egress,
            replay=replay,
            user=user,
            resilience=resilience,
        )
    if spec.kind == "model":
        if spec.connector == "scripted":
            raise UserError(
                "target.model.connector: scripted plays a sample's known trajectory",
                hint="use it as target.agent.model (the built-in agent)",
            )
        if not spec.model:
            raise UserError("target.model.model is required")
        key = resolve_secret(spec.secret_ref) if spec.secret_ref else None
        return chat_model(
            spec.connector,
            spec.base_url,
            spec.model,
            spec.params,
            api_key=key,
            api_version=spec.api_version,
            region=spec.region,
            auth=spec.auth,
            timeout=spec.timeout_s,
            system=spec.system or None,
            rate_limits=limits,
            resilience=resilience,
            at="target.model",
        )
    if spec.kind == "python":
        if not spec.python:
            raise UserError("target.python: give module:function")
        return PythonTarget(spec.python, timeout=spec.timeout_s)
    if spec.kind == "http":
        http = dict(spec.http)
        if not http.get("url"):
            raise UserError("target.http.url is required")
        headers = {
            str(k): resolve_secret(v[7:]) if isinstance(v, str) and v.startswith("secret:") else v
            for k, v in dict(http.get("headers") or {}).items()
        }
        return HttpTarget(
            str(http["url"]),
            method=str(http.get("method", "POST")),
            body=http.get("body"),
            output=http.get("output"),
            headers=headers,
            timeout=spec.timeout_s,
            rate_limits=limits,
            resilience=resilience,
        )
    raise UserError(f"target: unknown kind {spec.kind!r}; expected model, python, http or agent")


def renderer(spec: TargetSpec) -> Render:
    """The function that turns one sample into the target's input (raises ``RenderError``)."""
    if not spec.template:

        def plain(record: Record) -> InputLike:
            if record.input is None:
                raise RenderError("sample has no input")
            return record.input

        return plain

    from jinja2 import StrictUndefined, TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    try:
        template = env.from_string(spec.template)
    except TemplateError as e:
        raise UserError(f"target.template: {e}") from e

    def templated(record: Record) -> InputLike:
        value = plain_input(record.input) if record.input is not None else None
        try:
            return Content.of_text(template.render(input=value, metadata=record.metadata))
        except TemplateError as e:
            raise RenderError(f"template: {e}") from e

    return templated


def identity(target: Target, spec: TargetSpec) -> tuple[dict[str, Any], list[str]]:
    """The target's manifest entry and what about it cannot be pinned."""
    described = target.describe()
    unpinned: list[str] = []
    if spec.kind == "model":
        # the connector's URL: Bedrock's comes from its region, not the spec
        host = urlsplit(str(described.get("base_url") or spec.base_url)).hostname or ""
        if any(host == h or (h.startswith(".") and host.endswith(h)) for h in CLOSED_API_HOSTS):
            unpinned.append(
                f"target.model {spec.model!r}: a closed API model can change behind its name"
            )
        if not target.supports_seed:
            unpinned.append("target seeds: this connector does not pass seeds to the model")
    elif spec.kind == "http":
        unpinned.append(f"target.http {described.get('url')}: an external service is not versioned")
    described["unpinned"] = bool(unpinned)
    return described, unpinned

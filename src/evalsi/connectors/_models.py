"""The chat-model connectors by name: the one place a spec's ``connector:`` becomes a client.

A run's target, a judge and a simulated user all name a model the same way (connector, base
URL, model, params, secret, and a provider's own ``apiVersion`` / ``region``); they build it
here, so a connector added here is a target, a judge and a user at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsi.connectors._anthropic import Anthropic
from evalsi.connectors._azure import AzureOpenAI
from evalsi.connectors._bedrock import Bedrock
from evalsi.connectors._chat import ChatModel
from evalsi.connectors._gemini import GEMINI_BASE_URL, Gemini
from evalsi.connectors._guard import Resilience
from evalsi.connectors._openai import OpenAICompatible
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret
from evalsi.core import UserError

MODEL_CONNECTORS = ("openai-compatible", "anthropic", "azure-openai", "gemini", "bedrock")
"""The connectors that call a chat model."""

DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": GEMINI_BASE_URL,
}
"""The base URL a connector uses when a spec gives none (Bedrock's comes from its region)."""

BASE_URL_OPTIONAL = frozenset({*DEFAULT_BASE_URLS, "bedrock"})

BEARER_CONNECTORS = ("azure-openai", "gemini")
"""The connectors that can send their secret as an access token (``auth: bearer``): a
Microsoft Entra ID token for Azure, a Google OAuth token for Gemini."""


def chat_model(
    connector: str,
    base_url: str,
    model: str,
    params: Mapping[str, Any] | None = None,
    *,
    api_key: Secret | None = None,
    api_version: str = "",
    region: str = "",
    auth: str = "",
    timeout: float = 120.0,
    system: str | None = None,
    rate_limits: RateLimits | None = None,
    resilience: Resilience | None = None,
    at: str = "model",
) -> ChatModel:
    """The client for ``connector`` (no call made). ``at`` is the spec path of the model's
    fields, so a bad value is a ``UserError`` that names it (``spec.judges.default.region``).
    ``auth="bearer"`` sends the key as ``Authorization: Bearer`` (``BEARER_CONNECTORS``).

    Example:
        >>> chat_model("gemini", "", "gemini-2.5-flash").base_url
        'https://generativelanguage.googleapis.com'
    """
    if connector not in MODEL_CONNECTORS:
        raise UserError(
            f"{at}.connector: unknown connector {connector!r}",
            hint="use one of: " + ", ".join(MODEL_CONNECTORS),
        )
    base_url = base_url or DEFAULT_BASE_URLS.get(connector, "")
    if not base_url and connector not in BASE_URL_OPTIONAL:
        raise UserError(f"{at}.baseUrl is required (e.g. http://127.0.0.1:8000/v1)")
    bearer = auth == "bearer"
    if bearer and connector not in BEARER_CONNECTORS:
        raise UserError(f"{at}.auth: the {connector} connector sends its key its own way")
    common: dict[str, Any] = {
        "api_key": api_key,
        "timeout": timeout,
        "system": system,
        "rate_limits": rate_limits,
        "resilience": resilience,
    }
    try:
        if connector == "azure-openai":
            return AzureOpenAI(
                base_url, model, params, api_version=api_version, bearer=bearer, **common
            )
        if connector == "gemini":
            return Gemini(base_url, model, params, api_version=api_version, bearer=bearer, **common)
        if connector == "bedrock":
            return Bedrock(base_url, model, params, region=region, **common)
    except UserError as e:  # the connector names its field; the caller knows where it is
        if e.message.startswith(("baseUrl:", "apiVersion:", "region:")):
            raise UserError(f"{at}.{e.message}", hint=e.hint) from e
        raise
    cls = Anthropic if connector == "anthropic" else OpenAICompatible
    return cls(base_url, model, params, **common)

"""Azure OpenAI: the chat-completions wire format at Azure's address, with Azure's key header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from evalsi.connectors._guard import Resilience
from evalsi.connectors._openai import OpenAICompatible
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._secrets import Secret
from evalsi.core import UserError

if TYPE_CHECKING:
    import aiohttp


class AzureOpenAI(OpenAICompatible):
    """An Azure OpenAI deployment.

    ``base_url`` is the resource endpoint (``https://NAME.openai.azure.com``), ``model`` the
    deployment name and ``api_version`` the dated API version Azure requires; requests go to
    ``{base_url}/openai/deployments/{model}/chat/completions?api-version={api_version}``. The
    key travels in the ``api-key`` header; ``bearer=True`` sends it as a Microsoft Entra ID
    (Azure AD) token in ``Authorization: Bearer`` instead. Body, replies and tool calls are
    OpenAI's, so everything else is ``OpenAICompatible``'s.

    Example:
        >>> AzureOpenAI("https://res.openai.azure.com", "gpt4o-prod", api_version="2024-10-21")
        AzureOpenAI(base_url='https://res.openai.azure.com', model='gpt4o-prod', api_key=None)
    """

    connector = "azure-openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        params: Mapping[str, Any] | None = None,
        *,
        api_version: str,
        api_key: Secret | str | None = None,
        bearer: bool = False,
        timeout: float = 120.0,
        system: str | None = None,
        headers: Mapping[str, str] | None = None,
        rate_limits: RateLimits | None = None,
        resilience: Resilience | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        problem = azure_endpoint_problem(base_url)
        if problem:
            raise UserError(f"baseUrl: {problem}", hint="e.g. https://NAME.openai.azure.com")
        if not api_version:
            raise UserError(
                "apiVersion: Azure OpenAI needs an API version", hint="e.g. apiVersion: 2024-10-21"
            )
        self.api_version = api_version
        self.bearer = bearer
        super().__init__(
            base_url, model, params, api_key=api_key, timeout=timeout, system=system,
            headers=headers, rate_limits=rate_limits, resilience=resilience, session=session,
        )  # fmt: skip
        self._url = (
            f"{self.base_url}/openai/deployments/{quote(model, safe='')}/chat/completions"
            f"?api-version={quote(api_version, safe='')}"
        )

    def _auth(self, api_key: Secret) -> dict[str, str]:
        if self.bearer:
            return {"Authorization": f"Bearer {api_key.reveal()}"}
        return {"api-key": api_key.reveal()}

    def _describe_extra(self) -> dict[str, Any]:
        return {"api_version": self.api_version}


def azure_endpoint_problem(base_url: str) -> str | None:
    """What is wrong with an Azure resource endpoint, or None: it is a scheme and a host, the
    connector adds the ``/openai/deployments/...`` path itself."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"expected the resource endpoint as an https:// URL, got {base_url!r}"
    if parts.path.strip("/") or parts.query or parts.fragment:
        return (
            f"expected the resource endpoint alone, without a path or query, got {base_url!r} "
            "(the deployment is `model`, the API version `apiVersion`)"
        )
    return None

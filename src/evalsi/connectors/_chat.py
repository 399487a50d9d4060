"""What the chat-model connectors share: identity, a safe repr, and ``invoke`` over ``complete``.

Subclasses set the attributes in their constructor and implement ``complete``; the base adds
nothing to the wire format, which stays each provider's own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from evalsi.connectors._secrets import Secret
from evalsi.connectors._types import Completion, InputLike, TargetOutput, input_messages
from evalsi.core import Message


class ChatModel(ABC):
    """Base of ``OpenAICompatible`` and ``Anthropic``."""

    connector = ""
    base_url: str
    model: str
    params: dict[str, Any]
    api_key: Secret | None
    system: str | None

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

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        messages = input_messages(input, system=self.system)
        return (await self.complete(messages, seed=seed)).to_output()

    @abstractmethod
    async def complete(
        self, messages: Sequence[Message] | str, *, seed: int | None = None, **params: Any
    ) -> Completion:
        """One call to the model; ``params`` override the constructor's for this call."""

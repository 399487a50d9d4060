"""What the calls of a caller beside the target cost in a session (a judge, a simulated
user): one shape for every such account, reported beside the run's own usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class CallAccount:
    """What the calls of one caller beside the target (a judge, a simulated user) cost in a
    session: calls made, answers from a cache, tokens, USD (``usd_unknown``: calls with no
    price)."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    usd: float = 0.0
    usd_unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": self.calls,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "usd": None if self.usd_unknown and not self.usd else round(self.usd, 6),
            "usd_unknown": self.usd_unknown,
        }
        return out


__all__ = ["CallAccount"]

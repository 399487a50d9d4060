"""Errors a target call ends with: infrastructure (retried, never a failure) or the target's own.

One rule decides the split: a failure of the infrastructure is never scored as the model's.
An ``InfraError`` (a 429, a 5xx, a timeout, a dropped connection, a body that cannot be read, an
open circuit, an address the server's egress policy refuses) says nothing about the model: the
task ends as ``infra_error(kind)`` and is excluded from the metrics. A ``TargetError`` (a 4xx
the user must fix, such as a bad model name or a rejected key, or a Python target that raised) is
recorded on the sample and is not retried.
"""

from __future__ import annotations

from typing import Literal, get_args

from evalsi.core import RunError, UserError

InfraKind = Literal[
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "malformed_response",
    "circuit_open",
    "egress_denied",
    "sandbox",  # the sandbox itself broke (a runner failure)
    "harness",  # an agent's harness failed (not the agent)
    "checker",  # an end-state checker could not reach a verdict
    "cassette",  # a replay needed a call its cassette does not hold
    "plugin",  # an evaluator plugin's process died, hung or answered malformed
]
INFRA_KINDS: tuple[InfraKind, ...] = get_args(InfraKind)


class InfraError(RunError):
    """The call failed for a reason outside the target's behaviour.

    Attributes:
        kind: one of ``INFRA_KINDS``.
        status: the HTTP status, when there was a response.
        retry_after: seconds the server asked us to wait (``Retry-After``), when it did.
        endpoint: the endpoint (no query string, no credentials).
        attempts: how many attempts were made before giving up (set by the retry loop).
    """

    def __init__(
        self,
        kind: InfraKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        endpoint: str = "",
        attempts: int = 1,
    ) -> None:
        if kind not in INFRA_KINDS:
            raise ValueError(f"unknown infra error kind {kind!r}")
        super().__init__(message)
        self.kind: InfraKind = kind
        self.status = status
        self.retry_after = retry_after
        self.endpoint = endpoint
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        """Whether another attempt can help (an open circuit fails fast by design; the egress
        policy answers the same until the server's configuration changes; a cassette lacks the
        same call again)."""
        return self.kind not in ("circuit_open", "egress_denied", "cassette")

    def __str__(self) -> str:
        tail = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.kind}: {self.message}{tail}"


class TargetError(UserError):
    """The target answered with an error the user must fix, or a Python target raised.

    Recorded on the sample; never retried. ``status`` is the HTTP status when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        endpoint: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.endpoint = endpoint

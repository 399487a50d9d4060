"""A circuit breaker per endpoint: stop calling an endpoint that keeps failing.

Closed: calls go through and consecutive infrastructure failures are counted. After
``failure_threshold`` of them the circuit opens: calls fail at once with
``InfraError("circuit_open")`` and no request is made. After ``cooldown`` seconds it is
half-open: one probe call goes through; its success closes the circuit, its failure opens it for
another cooldown. Rate limiting (429) is not a failure here (backoff handles it), and a 4xx
target error proves the endpoint is up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evalsi.connectors._clock import SYSTEM_CLOCK, Clock
from evalsi.connectors._errors import InfraError

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    failure_threshold: int = 5
    cooldown: float = 30.0

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if self.cooldown < 0:
            raise ValueError("cooldown must not be negative")


class CircuitBreaker:
    """The breaker of one endpoint.

    Example:
        >>> b = CircuitBreaker("http://x", BreakerPolicy(failure_threshold=2, cooldown=60))
        >>> b.record_failure(); b.record_failure(); b.state
        'open'
    """

    __slots__ = (
        "_clock",
        "_failures",
        "_last_cause",
        "_opened_at",
        "_probing",
        "endpoint",
        "policy",
    )

    def __init__(
        self, endpoint: str, policy: BreakerPolicy, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.endpoint = endpoint
        self.policy = policy
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self._last_cause = ""

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._probing or self._clock.monotonic() - self._opened_at >= self.policy.cooldown:
            return "half_open"
        return "open"

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def before_call(self) -> None:
        """Let a call through, or raise ``InfraError("circuit_open")``."""
        if self._opened_at is None:
            return
        if not self._probing and self.state == "half_open":
            self._probing = True  # this caller is the probe
            return
        remaining = self.policy.cooldown - (self._clock.monotonic() - self._opened_at)
        # The last failure's own message rides along: an open circuit is what the user sees
        # on every task after the first few, and it must still say why (refused, DNS, TLS...).
        raise InfraError(
            "circuit_open",
            f"{self.endpoint} failed {self._failures} times in a row; not calling it"
            + (f" for another {remaining:.1f}s" if remaining > 0 else " while a probe runs")
            + (f"; last failure: {self._last_cause}" if self._last_cause else ""),
            endpoint=self.endpoint,
        )

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self, cause: str = "") -> None:
        """Count a failure; ``cause`` (its message) is named while the circuit is open."""
        self._failures += 1
        if cause:
            self._last_cause = cause
        if self._probing or self._failures >= self.policy.failure_threshold:
            self._opened_at = self._clock.monotonic()
        self._probing = False

    def record_neutral(self) -> None:
        """The call told us nothing (rate limited, cancelled): a probe slot is freed."""
        self._probing = False


class BreakerRegistry:
    """One breaker per endpoint, shared by every task of a process (or a run)."""

    __slots__ = ("_breakers", "_clock", "policy")

    def __init__(self, policy: BreakerPolicy | None = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.policy = policy or BreakerPolicy()
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}

    def get(self, endpoint: str) -> CircuitBreaker:
        breaker = self._breakers.get(endpoint)
        if breaker is None:
            breaker = self._breakers[endpoint] = CircuitBreaker(
                endpoint, self.policy, clock=self._clock
            )
        return breaker

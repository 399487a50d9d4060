"""``RunStatus``: every state a stored run can be in, as one typed enum."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's status. Members are strings, so a stored status compares equal to its member.

    Example:
        >>> RunStatus("done") is RunStatus.DONE, RunStatus.DONE == "done"
        (True, True)
    """

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    STOPPED = "stopped"  # a budget was hit
    INCOMPLETE = "incomplete"  # every task was lost to infrastructure
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the process was stopped or killed; resumable
    CANCELLED = "cancelled"  # stopped on request

    @classmethod
    def of_exception(cls, error: BaseException, *, on_request: bool = False) -> RunStatus:
        """How a run that ``error`` stopped ends: interrupted (Ctrl-C, a signal, a cancelled
        task), cancelled (that, asked for by a user), or failed (anything else)."""
        import asyncio

        if isinstance(error, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
            return cls.CANCELLED if on_request else cls.INTERRUPTED
        return cls.FAILED

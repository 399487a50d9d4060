"""Remote ids derived from evalsi ids, so a sink that sends the same thing twice names the same
remote objects twice: Langfuse upserts a trace, a score or a dataset item by its id, and
LangSmith refuses a run, a feedback or an example whose id it already holds — either way a
retried export leaves no duplicate.

Each id hashes the JSON array ``[purpose, *parts]``: JSON quotes every string, so parts can hold
any character (``|``, ``"``, none at all) without two different tuples meeting — ``("a", "b")``
and ``("ab", "")`` differ — and ``purpose`` keeps a trace id from ever equalling a score id.
"""

from __future__ import annotations

import hashlib
import uuid

import orjson

# Fixed forever: changing it renames every LangSmith object evalsi ever sent.
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://evals.si/evalsi/sinks")


def _digest(purpose: str, parts: tuple[str | int, ...]) -> bytes:
    return hashlib.sha256(orjson.dumps([purpose, *parts])).digest()


def hex_id(purpose: str, *parts: str | int, chars: int = 32) -> str:
    """``chars`` lowercase hex digits (32: an OTel/Langfuse trace id, 16: a span id).

    Example:
        >>> hex_id("trace", "run-1", "rec-1", 0) == hex_id("trace", "run-1", "rec-1", 0)
        True
        >>> len(hex_id("span", "run-1", "rec-1", 0, chars=16))
        16
    """
    if not 1 <= chars <= 64:
        raise ValueError(f"chars: expected 1 to 64 hex digits, got {chars}")
    return _digest(purpose, parts).hex()[:chars]


def uuid_id(purpose: str, *parts: str | int) -> uuid.UUID:
    """A name-based UUID (version 5) in evalsi's namespace: what LangSmith takes as an id."""
    return uuid.uuid5(_NAMESPACE, orjson.dumps([purpose, *parts]).decode())


def task_trace_id(run_id: str, record_id: str, trial: int) -> str:
    """The Langfuse trace id of one task of a run: 32 lowercase hex digits, as OTel's."""
    return hex_id("langfuse.trace", run_id, record_id, trial)


def task_run_id(run_id: str, record_id: str, trial: int) -> uuid.UUID:
    """The LangSmith run id of one task of a run."""
    return uuid_id("langsmith.run", run_id, record_id, trial)


__all__ = ["hex_id", "task_run_id", "task_trace_id", "uuid_id"]

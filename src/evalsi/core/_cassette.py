"""A task's cassette: every exchange of an agent run with the world — each model call and each
tool call — in the order the calls started, so the task can be played again with no live call.

An exchange keeps its channel (``model``, ``tool:NAME``, or a connector's own, ``a2a`` say),
the sha256 of its request (the request itself is not kept: it is the conversation so far, and
the trajectory already holds it) and its response, as JSON bytes. Stored, a response is a blob
named by its sha256 (``store``: ``cassette_blobs``), so a response repeated across tasks and
trials is kept once; the cassette itself is the index ``[[channel, request, response], …]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import orjson

from evalsi.core._content import JsonValue

CASSETTE_FORMAT = 1


def request_key(request: JsonValue) -> str:
    """The sha256 (hex) of a request's canonical JSON: keys sorted, so equal requests match."""
    data = orjson.dumps(request, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Exchange:
    """One call and its answer: ``response`` is the answer's JSON (bytes), ``response_key``
    its sha256 (hex), computed once when not given."""

    channel: str
    request: str
    response: bytes
    response_key: str = ""

    def __post_init__(self) -> None:
        if not self.response_key:
            object.__setattr__(self, "response_key", hashlib.sha256(self.response).hexdigest())

    def value(self) -> JsonValue:
        return orjson.loads(self.response)


@dataclass(frozen=True, slots=True)
class Cassette:
    """The exchanges of one task, in the order their calls started."""

    exchanges: tuple[Exchange, ...] = ()
    stored: bool = False
    """Every response is a blob of the store already (a replay's, served from it)."""

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)

    def index(self) -> str:
        """The stored index: ``{"v": 1, "x": [[channel, request, response sha256], …]}``."""
        rows = [[e.channel, e.request, e.response_key] for e in self.exchanges]
        return orjson.dumps({"v": CASSETTE_FORMAT, "x": rows}).decode()

    def blobs(self) -> dict[str, bytes]:
        """The responses by their sha256, each once."""
        return {e.response_key: e.response for e in self.exchanges}

    @classmethod
    def from_index(cls, index: str | bytes, blobs: Mapping[str, bytes]) -> Cassette:
        """The cassette an ``index`` names, its responses from ``blobs``; ``ValueError`` when
        the index is malformed or a blob is missing."""
        doc = orjson.loads(index)
        if not isinstance(doc, dict) or doc.get("v") != CASSETTE_FORMAT:
            raise ValueError(f"not a cassette index of format {CASSETTE_FORMAT}")
        out: list[Exchange] = []
        for row in doc.get("x", ()):
            channel, request, response = row
            body = blobs.get(response)
            if body is None:
                raise ValueError(f"the cassette's response {response[:12]} is not stored")
            out.append(Exchange(str(channel), str(request), body, str(response)))
        return cls(tuple(out), stored=True)

    @staticmethod
    def keys_of(index: str | bytes) -> Sequence[str]:
        """The response blobs an index names."""
        doc = orjson.loads(index)
        return [row[2] for row in doc.get("x", ())] if isinstance(doc, dict) else []

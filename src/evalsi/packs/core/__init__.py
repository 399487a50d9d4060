"""The core pack: matching, regex, JSON, length and usage evaluators with no model behind them.

Every evaluator here is registered as ``builtin/<name>@1.0.0``; ``evalsi catalog show NAME``
prints its params and an example.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.core._json import json_schema, json_valid
from evalsi.packs.core._length import length
from evalsi.packs.core._match import (
    NO_CHOICE,
    contains,
    exact_match,
    fuzzy_match,
    one_of,
    starts_with,
)
from evalsi.packs.core._regex import regex
from evalsi.packs.core._usage import cost, latency, tokens

EVALUATORS: tuple[Evaluator, ...] = (
    exact_match,
    fuzzy_match,
    contains,
    starts_with,
    one_of,
    regex,
    json_valid,
    json_schema,
    length,
    latency,
    tokens,
    cost,
)
"""Every evaluator of the core pack."""

__all__ = [
    "EVALUATORS",
    "NO_CHOICE",
    "contains",
    "cost",
    "exact_match",
    "fuzzy_match",
    "json_schema",
    "json_valid",
    "latency",
    "length",
    "one_of",
    "regex",
    "starts_with",
    "tokens",
]

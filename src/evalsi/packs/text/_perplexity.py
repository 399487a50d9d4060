"""Perplexity of an output from the token log-probabilities the model reported with it.

evalsi does not run a language model here: the logprobs come with the record, where the
model's API put them. ``perplexity = exp(-mean(logprobs))`` (natural log), per record.

Where they are read from, first found wins:

1. ``output`` as a JSON object ``{"text": "…", "logprobs": …}``;
2. ``metadata.logprobs``.

and what ``logprobs`` may be: a list of numbers; a list of objects with a ``logprob`` field
(OpenAI chat ``choices[].logprobs.content``); or an object holding such a list under
``content`` (the whole OpenAI chat ``logprobs`` object) or ``token_logprobs`` (OpenAI
completions). ``null`` entries (a first prompt token has no logprob) are left out.
"""

from __future__ import annotations

import math
from typing import Any

from evalsi.core import Record, Score
from evalsi.evaluators import Skip

NO_LOGPROBS = (
    'no token logprobs: give output as {"text": …, "logprobs": [...]} or metadata.logprobs'
)
_TOLERANCE = 1e-6  # float32 log-softmax can round a certain token's logprob just above 0


def find_logprobs(record: Record) -> Any:
    """The raw ``logprobs`` value of a record, or None."""
    output = record.output
    if output is not None and output.kind == "json" and isinstance(output.value, dict):
        found = output.value.get("logprobs")
        if found is not None:
            return found
    return record.metadata.get("logprobs")


def _entries(raw: Any) -> list[Any]:
    if isinstance(raw, dict):
        for key in ("content", "token_logprobs"):
            if isinstance(raw.get(key), list):
                return raw[key]  # type: ignore[no-any-return]
        raise ValueError(
            "logprobs is an object without a 'content' or 'token_logprobs' list; "
            "give a list of numbers"
        )
    if isinstance(raw, list):
        return raw
    raise ValueError(f"logprobs must be a list of numbers, got {type(raw).__name__}")


def token_logprobs(raw: Any) -> list[float]:
    """The numbers in a ``logprobs`` value; ValueError naming the first bad entry."""
    out: list[float] = []
    for i, entry in enumerate(_entries(raw)):
        value = entry.get("logprob") if isinstance(entry, dict) else entry
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"logprobs[{i}] is not a number: {entry!r}"[:200])
        value = float(value)
        if math.isnan(value):
            raise ValueError(f"logprobs[{i}] is NaN")
        if value == -math.inf:
            raise ValueError(f"logprobs[{i}] is -inf (probability 0): perplexity is infinite")
        if value > _TOLERANCE:
            raise ValueError(
                f"logprobs[{i}] = {value} is above 0; log-probabilities are <= 0 "
                "(were probabilities given instead of their logarithms?)"
            )
        out.append(value)
    return out


def perplexity(record: Record) -> Score:
    """Perplexity exp(-mean token logprob) of the output, >= 1 (lower is better)."""
    raw = find_logprobs(record)
    if raw is None:
        raise Skip(NO_LOGPROBS)
    values = token_logprobs(raw)
    if not values:
        raise Skip("logprobs holds no token log-probability")
    try:
        mean = math.fsum(values) / len(values)
    except OverflowError:
        raise ValueError(
            f"perplexity overflows: the {len(values)} logprobs sum beyond a float"
        ) from None
    try:
        value = math.exp(-mean)
    except OverflowError:
        raise ValueError(
            f"perplexity overflows: mean logprob {mean:.4g} over {len(values)} tokens"
        ) from None
    return Score(
        number=value, explanation=f"{len(values)} tokens, mean logprob {mean:.6g} (natural log)"
    )

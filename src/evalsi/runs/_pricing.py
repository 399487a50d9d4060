"""What a model call costs: USD per million input and output tokens, by model name.

The built-in table is small and dated; users extend or override it with a YAML or JSON file
named by ``EVALSI_PRICING``: ``{"model-name": {"input": 2.5, "output": 10.0}}`` (USD per 1M
tokens). A model the table does not know has an unknown cost (``None``), never zero.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalsi.core import Usage, UserError

BUILTIN: dict[str, tuple[float, float]] = {  # (input, output), as of 2025-01
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "o3-mini": (1.1, 4.4),
    "claude-3-5-haiku-latest": (0.8, 4.0),
    "claude-3-5-sonnet-latest": (3.0, 15.0),
    "claude-3-7-sonnet-latest": (3.0, 15.0),
    "claude-sonnet-4-0": (3.0, 15.0),
    "claude-opus-4-0": (15.0, 75.0),
}


@lru_cache(maxsize=4)
def _user_table(path: str) -> dict[str, tuple[float, float]]:
    text = Path(path).read_text(encoding="utf-8")
    data: Any
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        import orjson

        data = orjson.loads(text)
    if not isinstance(data, dict):
        raise UserError(f"EVALSI_PRICING={path}: expected a mapping of model -> prices")
    out: dict[str, tuple[float, float]] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
            raise UserError(
                f"EVALSI_PRICING={path}: model {model!r} needs input and output (USD per 1M tokens)"
            )
        out[str(model)] = (float(entry["input"]), float(entry["output"]))
    return out


def _table() -> dict[str, tuple[float, float]]:
    """The built-in table, overridden by the ``EVALSI_PRICING`` file when one is named."""
    path = os.environ.get("EVALSI_PRICING")
    if not path:
        return BUILTIN
    try:
        return {**BUILTIN, **_user_table(path)}
    except OSError as e:
        raise UserError(f"EVALSI_PRICING={path}: cannot read it: {e}") from e


def price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or ``None`` when unknown."""
    return _table().get(model)


def _cost(table: Mapping[str, tuple[float, float]], model: str, usage: Usage) -> float | None:
    if usage.cost_usd is not None:
        return usage.cost_usd
    prices = table.get(model) if model else None
    if prices is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    return ((usage.input_tokens or 0) * prices[0] + (usage.output_tokens or 0) * prices[1]) / 1e6


def cost_usd(model: str, usage: Usage) -> float | None:
    """The cost of one call: the server's own figure when it gave one, else from the table."""
    return _cost(_table(), model, usage)


def costing() -> Callable[[str, Usage], float | None]:
    """``cost_usd`` with the table read now, once: a run prices every call by the table as it
    stood when the run began, without reading the environment for each of its calls."""
    return functools.partial(_cost, _table())

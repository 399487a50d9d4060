"""Read the texts a text metric compares: one hypothesis (``output``) and its references.

Every metric of the pack reads records the same way, so a record that one metric accepts
is accepted by all of them, and a refusal says the same thing everywhere:

- ``output``: text; chat messages (the last assistant message); a JSON string; or a JSON
  object with a ``"text"`` string (the shape ``perplexity`` reads, with ``"logprobs"``).
- ``reference``: text or a JSON string (one reference), or a JSON list of strings (several
  references of one hypothesis, as sacrebleu's multi-reference input).

A JSON list in ``output`` is refused: one record holds one hypothesis, and a list there is
almost always references put in the wrong field.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from evalsi.core import Record, UserError
from evalsi.evaluators import Skip

TEXT_EXTRA = "pip install 'evalsi[text]'"


def need_module(metric: str, module: str, extra: str = TEXT_EXTRA) -> ModuleType:
    """Import an optional library when an evaluator is bound; missing → a UserError naming
    the extra to install (raised at bind time, before any record is read)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UserError(
            f"{metric} needs the {module.split('.')[0]} library, which is not installed",
            hint=extra,
        ) from e


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "list"
    return "object" if isinstance(value, dict) else type(value).__name__


def hypothesis(record: Record, metric: str) -> str:
    """The output as one string; ValueError (→ ERROR) when it is not text."""
    content = record.output
    assert content is not None  # `requires` checked it
    kind = content.kind
    if kind == "text":
        return content.value  # type: ignore[no-any-return]
    if kind == "messages":
        return content.as_text()
    if kind == "json":
        value = content.value
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and isinstance(value.get("text"), str):
            return value["text"]  # type: ignore[no-any-return]
        if isinstance(value, list):
            raise ValueError(
                f"{metric} needs one hypothesis string, but output is a JSON list; "
                "several references go in reference, not in output"
            )
        raise ValueError(
            f"{metric} needs a text output, got a JSON {_json_kind(value)} "
            '(an object must carry the text as {"text": "…"})'
        )
    raise ValueError(f"{metric} needs a text output, got {kind} content")


def references(record: Record, metric: str) -> list[str]:
    """The reference strings (one or more); Skip when the list is empty."""
    content = record.reference
    assert content is not None  # `requires` checked it
    kind = content.kind
    if kind == "text":
        return [content.value]
    if kind == "messages":
        return [content.as_text()]
    if kind == "json":
        value = content.value
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            if not value:
                raise Skip("reference is an empty list: no reference to compare with")
            for item in value:
                if not isinstance(item, str):
                    raise ValueError(
                        f"{metric} needs references as strings; the reference list holds "
                        f"a {_json_kind(item)}"
                    )
            return value
        raise ValueError(
            f"{metric} needs a text reference or a list of text references, got a JSON "
            f"{_json_kind(value)}"
        )
    raise ValueError(f"{metric} needs a text reference, got {kind} content")

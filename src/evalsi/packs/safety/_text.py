"""What the safety evaluators read: every word the model produced, and per-record lists.

For a chat output, a leak in an earlier assistant turn or in a tool call's arguments is still a
leak (a tool call is how an agent exfiltrates), so the scanned text is every assistant message
and every tool-call argument, not only the final answer that ``Content.as_text()`` returns.
"""

from __future__ import annotations

from typing import Any

import orjson

from evalsi.core import Content
from evalsi.packs._declare import yes_no


def produced_text(content: Content) -> str:
    """The text a model produced: all assistant turns and tool-call arguments of a chat, else
    ``as_text()``.

    Example:
        >>> produced_text(Content.of_text("hello"))
        'hello'
    """
    messages = content.messages
    if messages is None:
        return content.as_text()
    parts: list[str] = []
    for message in messages:
        if message.role != "assistant":
            continue
        if message.content:
            parts.append(message.content)
        for call in message.tool_calls:
            args = call.arguments
            parts.append(args if isinstance(args, str) else orjson.dumps(args).decode())
    return "\n".join(parts)


def string_list(value: Any, where: str) -> list[str]:
    """A metadata value that holds one string or a list of strings, as a list.

    Raises:
        ValueError: anything else (the record is an ERROR naming ``where``).
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"{where} must be a string or a list of strings, got {type(value).__name__}")


def as_bool(value: Any, where: str) -> bool:
    """``true``/``false`` (also as the strings ``"true"``, ``"false"``, ``"yes"``, ``"no"``).

    Raises:
        ValueError: anything else.
    """
    found = yes_no(value)
    if found is None:
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return found

"""The Python target of ``run-python.yaml``: knows a few answers in ``qa.jsonl``, echoes the rest.

``evalsi run`` imports it as ``echo_target:answer``, so the ``examples`` directory must be on the
import path: ``PYTHONPATH=examples evalsi run -f examples/run-python.yaml``. A target is any
callable (sync or async) taking the sample's input, here a string, and returning the output.
"""

from __future__ import annotations

from typing import Any

KNOWN = {
    "What is the capital of France?": "Paris",
    "What is the capital of Japan?": "Tokyo",
    "What is 2 + 2?": "4",
    "Chemical symbol for gold?": "Au",
    "Which planet is known as the red planet?": "Mars",
}


def answer(input: Any) -> str:
    """The known answer, or the question itself (so some samples pass and some fail)."""
    text = input if isinstance(input, str) else str(input)
    return KNOWN.get(text, text)

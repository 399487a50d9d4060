"""The Python target of ``run-code.yaml``: a stand-in for a code model that answers each prompt
of ``problems.jsonl`` with its recorded candidates in turn (trial 1 gets the first, trial 2 the
second, ...), so ``trials: 3`` yields a mix of passing and failing programs and pass@k.

``evalsi run`` imports it as ``sampler:generate``, so this directory must be on the import
path: ``PYTHONPATH=examples/code evalsi run -f examples/code/run-code.yaml``.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_LOCK = threading.Lock()
_CYCLES: dict[str, Iterator[str]] = {}


def _load() -> None:
    for line in (_HERE / "samples.jsonl").read_text().splitlines():
        row = json.loads(line)
        _CYCLES[row["input"]] = itertools.cycle(row["output"])


def generate(input: Any) -> str:
    """The next recorded candidate for this prompt, as a model would answer: in a fence
    (unless the recorded answer already is one)."""
    prompt = input if isinstance(input, str) else str(input)
    with _LOCK:
        if not _CYCLES:
            _load()
        program = next(_CYCLES[prompt])
    return program if "```" in program else f"Here it is:\n```python\n{program}```\n"

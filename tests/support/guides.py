"""Helpers for e2e tests that run a guide's commands as written: the `$ evalsi eval` lines of
its console blocks, the JSON a command prints, and the example files it reads."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def guide_commands(guide: Path) -> list[list[str]]:
    """Every ``$ evalsi eval`` line of the guide's console blocks (continuations joined), as
    arguments after ``evalsi``."""
    text = guide.read_text().replace("\\\n", " ")
    return [shlex.split(m)[1:] for m in re.findall(r"^\$ (evalsi eval .*)$", text, re.MULTILINE)]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_json(run_evalsi: Callable[..., Any], cwd: Path, args: list[str]) -> dict[str, Any]:
    """The command's ``--format json`` output (added when absent); it must exit 0."""
    if "--format" not in args:
        args = [*args, "--format", "json"]
    proc = run_evalsi(cwd, *args)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def means(out: dict[str, Any]) -> dict[str, float]:
    """Metric name → mean of a ``--format json`` output."""
    return {m["metric"]: m["mean"] for m in out["metrics"]}


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One shell command of a document's ``bash``/``console``/``sh`` blocks, as written."""

    doc: str  # the document's path relative to the repository
    line: int  # where the command starts
    text: str  # continuations joined; a quoted string may span lines

    @property
    def words(self) -> list[str]:
        """The command's words (comments dropped), for classifying it."""
        return shlex.split(self.text.replace("\\\n", " "), comments=True)


_FENCE = re.compile(r"^```(bash|console|sh|shell)[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def doc_commands(doc: Path, root: Path) -> list[DocCommand]:
    """Every command of ``doc``'s shell blocks: in ``console`` blocks the ``$ `` lines, in the
    others every line that is not blank or a comment. A line ending in ``\\`` continues, and so
    does one inside an unclosed quote (a multi-line ``curl -d '…'``)."""
    text = doc.read_text()
    out: list[DocCommand] = []
    for fence in _FENCE.finditer(text):
        first = text.count("\n", 0, fence.start(2)) + 1
        console = fence.group(1) == "console"
        pending: list[str] = []
        start = 0
        for offset, raw in enumerate(fence.group(2).splitlines()):
            if not pending:
                line = raw
                if console:
                    if not raw.startswith("$ "):
                        continue
                    line = raw[2:]
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                start = first + offset
            else:
                line = raw
            pending.append(line)
            joined = "\n".join(pending)
            if joined.endswith("\\"):
                continue
            try:
                shlex.split(joined, comments=True)
            except ValueError:  # an open quote: the command goes on
                continue
            out.append(DocCommand(str(doc.relative_to(root)), start, joined))
            pending = []
        assert not pending, f"{doc}:{start}: a command never ends (open quote or trailing \\)"
    return out

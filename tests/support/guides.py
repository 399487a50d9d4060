"""Helpers for e2e tests that run a guide's commands as written: the `$ evalsi eval` lines of
its console blocks, the JSON a command prints, and the example files it reads."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
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

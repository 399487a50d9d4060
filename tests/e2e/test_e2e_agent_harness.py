"""The bring-your-own harness examples run as their comments say, through the CLI: the to-do
harness as a Python class, as a Python process over gRPC, and in JavaScript (Node.js with
@grpc/grpc-js, which .ci/run installs) — the same harness protocol, the same results."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "agent" / "harness"
NODE_MODULES = ROOT / ".tools" / "npm" / "node_modules"


def _tasks(run_evalsi: Callable[..., Any], tmp_path: Path) -> list[dict[str, Any]]:
    shown = run_evalsi(tmp_path, "runs", "show", "latest", "--tasks", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout)["tasks"])


def _check(tasks: list[dict[str, Any]]) -> None:
    by_id = {t["sample_id"]: t for t in tasks}
    assert by_id["milk"]["output"] == "3 items"
    assert by_id["empty"]["output"] == "1 items"  # the sample's fixtures overlaid the spec's
    step = by_id["milk"]["trajectory"]["steps"][0]
    assert (step["type"], step["tool"], step["arguments"]) == (
        "tool_call",
        "add_item",
        {"item": "buy milk"},
    )
    assert all(t["scores"][0]["scores"] == {"exact-match": True} for t in tasks)


@pytest.mark.parametrize("spec", ["run-python-harness.yaml", "run-process-harness.yaml"])
def test_the_python_harness_examples(
    run_evalsi: Callable[..., Any], tmp_path: Path, spec: str
) -> None:
    env = {"PYTHONPATH": f"{EXAMPLES}:{ROOT / 'src'}"}
    done = run_evalsi(tmp_path, "run", "-f", EXAMPLES / spec, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "done"
    _check(_tasks(run_evalsi, tmp_path))


@pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_MODULES / "@grpc" / "grpc-js").is_dir(),
    reason="Node.js or @grpc/grpc-js is not installed (.ci/run installs it into .tools/npm)",
)
def test_a_harness_in_javascript_speaks_the_same_protocol(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    spec = EXAMPLES / "node" / "run-node-harness.yaml"
    done = run_evalsi(
        tmp_path, "run", "-f", spec, "--format", "json", env={"NODE_PATH": str(NODE_MODULES)}
    )
    assert done.returncode == 0, done.stderr
    _check(_tasks(run_evalsi, tmp_path))

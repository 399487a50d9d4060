"""Which replays may branch: a run whose tasks keep state in a workspace may not (its replayed
tool calls changed nothing there), except at step 0 or for a CLI agent, whose workspace is
rebuilt from its recorded diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.runs import check_branch
from evalsi.specs import run_spec_from_yaml

AGENT = """
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: b}}
spec:
  target:
    agent:
{agent}
  environment:
{environment}
  dataset: {{path: d.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""
MODEL = '      model: {connector: openai-compatible, baseUrl: "http://127.0.0.1:9/v1", model: m}'
TOOLS = '    tools: [{function: "os:getcwd"}]'
WORKSPACE = TOOLS + '\n    fixtures: {files: {"a.txt": "x"}}'
CLI = "      kind: cli\n      cli: {command: [sh, -c, 'true']}"


def _spec(tmp: Path, agent: str, environment: str) -> object:
    (tmp / "d.jsonl").write_text('{"id": "a", "input": "q"}\n')
    text = AGENT.format(agent=agent, environment=environment)
    return run_spec_from_yaml(text, base_dir=tmp)


@pytest.mark.parametrize("branch", [None, 0, 1, 7])
def test_a_run_without_a_workspace_branches_anywhere(tmp_path: Path, branch: int | None) -> None:
    check_branch(_spec(tmp_path, MODEL, TOOLS), branch)  # type: ignore[arg-type]


@pytest.mark.parametrize("branch", [1, 3])
def test_a_workspace_run_refuses_to_branch_past_step_0(tmp_path: Path, branch: int) -> None:
    spec = _spec(tmp_path, MODEL, WORKSPACE)
    with pytest.raises(UserError, match="keep state in a workspace"):
        check_branch(spec, branch)  # type: ignore[arg-type]
    check_branch(spec, 0)  # type: ignore[arg-type]  # all live again
    check_branch(spec, None)  # type: ignore[arg-type]  # a whole replay


def test_a_cli_agent_branches_since_its_diff_rebuilds_the_workspace(tmp_path: Path) -> None:
    spec = _spec(tmp_path, CLI, '    fixtures: {files: {"a.txt": "x"}}')
    check_branch(spec, 1)  # type: ignore[arg-type]


def test_a_negative_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="0 or more"):
        check_branch(_spec(tmp_path, MODEL, TOOLS), -1)  # type: ignore[arg-type]

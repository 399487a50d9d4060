"""The cli agent on real bubblewrap: a script edits a checked-out repository in the task's
sandbox, its reported commands and its git diff land in the trajectory, checkers grade the
workspace; failure, timeout and a broken report are graded as the agent's; a recorded task
replays from its cassette without running the script, and the checkers give the same verdicts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.agents import AgentTarget
from evalsi.connectors import InfraError, TargetOutput, TaskInfo
from evalsi.core import Cassette, Record, UserError
from evalsi.sandbox import (
    Level,
    Sandbox,
    SandboxConfig,
    SandboxSpec,
    SandboxUnavailable,
    configure,
    current_config,
)
from evalsi.specs import run_spec_from_yaml
from tests.support.swebench_fixture import git, make_repo


def _bwrap() -> str:
    try:
        Sandbox.create(SandboxSpec(min_isolation=Level.NAMESPACED)).destroy()
    except SandboxUnavailable as e:
        return str(e)
    return ""


pytestmark = pytest.mark.skipif(bool(_bwrap()), reason=f"no namespaced sandbox: {_bwrap()}")

FIX = (
    "sed 's/a - b/a + b/' calc/__init__.py > .evalsi/fixed && cat .evalsi/fixed > calc/__init__.py"
    " && cat /proc/sys/kernel/random/uuid > NONCE"
    ' && echo \'{"command": "sed calc/__init__.py", "exit_code": 0}\' >> "$EVALSI_COMMANDS_FILE"'
    ' && echo "not json" >> "$EVALSI_COMMANDS_FILE"'
    ' && echo \'{"command": "pytest", "exit_code": 1}\' >> "$EVALSI_COMMANDS_FILE"'
    ' && printf "task: %s" "$EVALSI_TASK" && cat .evalsi/task.md >&2'
)
TEST = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"


class _Replay:
    def __init__(self, cassettes: dict[str, Cassette]) -> None:
        self.cassettes = cassettes
        self.live_after: int | None = None

    def cassette(self, sample_id: str, trial: int) -> Cassette | None:
        return self.cassettes.get(sample_id)


def _spec(repo: Path, command: str, *, extra: str = "", timeout: float = 60) -> Any:
    text = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: cli}}
spec:
  target:
    agent:
      kind: cli
      cli:
        command: [sh, -c, {json.dumps(command)}]
        timeoutSeconds: {timeout}
  environment:
    repository: {{path: {repo}}}
    sandbox: {{minIsolation: namespaced}}
    checkers:
      - exitCode: {{command: [python3, -c, {json.dumps(TEST)}]}}
        name: add-works
{extra}
  dataset: {{path: tasks.jsonl}}
  evaluators: [{{ref: task-success}}]
"""
    (repo.parent / "tasks.jsonl").write_text('{"input": "-"}\n')
    return run_spec_from_yaml(text, base_dir=repo.parent)


def _invoke(spec: Any, record: Record, replay: _Replay | None = None) -> TargetOutput:
    async def go() -> TargetOutput:
        target = AgentTarget(None, spec.target.agent, spec.environment, replay=replay)
        async with target:
            assert record.input is not None
            info = TaskInfo("run", record.id, 0, record)
            return await target.invoke(record.input, task=info)

    return asyncio.run(go())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "calc"
    make_repo(path)
    return path


def _steps(out: TargetOutput, name: str) -> list[Any]:
    assert out.trajectory is not None
    return [s for s in out.trajectory.steps if s.name == name]


def test_a_script_fixes_the_repository_and_the_checkers_grade_it(repo: Path) -> None:
    out = _invoke(_spec(repo, FIX), Record("t1", input=_text("make add add")))
    t = out.trajectory
    assert t is not None
    assert t.stop_reason == "final_answer"
    assert [c.passed for c in t.checks] == [True]
    shell = _steps(out, "shell")
    assert [s.tool_call.arguments for s in shell] == [
        {"command": "sed calc/__init__.py"},
        {"command": "pytest"},
    ]
    assert shell[1].error == "exit 1"
    assert any("skipped" in str(s.output) for s in _steps(out, "note"))
    assert _steps(out, "stdout")[0].output == "task: make add add"
    assert _steps(out, "stderr")[0].output == "make add add"
    diff = _steps(out, "git_diff")[0].output["diff"]
    assert "+    return a + b" in diff
    assert "NONCE" in diff
    assert ".evalsi" not in diff  # the agent's scratch space is not its change
    assert out.output is not None
    assert out.output.as_text() == diff
    assert isinstance(t.end_state, dict)
    assert t.end_state["harness"]["diff"] == diff
    assert not (repo / "NONCE").exists()  # the repository itself was never written
    assert git(repo, "status", "--porcelain") == ""


def test_a_failing_agent_is_graded_not_lost(repo: Path) -> None:
    out = _invoke(_spec(repo, "echo oops >&2; exit 3"), Record("t", input=_text("x")))
    assert out.trajectory is not None
    assert out.trajectory.stop_reason == "error"
    assert _steps(out, "cli")[0].error == "exit 3"
    assert [c.passed for c in out.trajectory.checks] == [False]
    assert _steps(out, "git_diff")[0].output == {"diff": ""}


def test_an_agent_past_its_time_is_a_timeout(repo: Path) -> None:
    out = _invoke(_spec(repo, "sleep 30", timeout=0.5), Record("t", input=_text("x")))
    assert out.trajectory is not None
    assert out.trajectory.stop_reason == "timeout"


def test_a_hostile_agent_cannot_reach_out_through_symlinks(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    script = (
        f"rm calc/__init__.py && ln -s {secret} calc/__init__.py && ln -s {tmp_path} out"
        " && mkfifo pipe && ln -s /etc/passwd .evalsi/commands.jsonl"
    )
    out = _invoke(_spec(repo, script), Record("t", input=_text("x")))
    diff = _steps(out, "git_diff")[0].output["diff"]
    assert "host secret" not in diff  # a link is a link, never followed
    assert f"+{secret}" in diff
    assert "new file mode 120000" in diff
    assert "pipe" not in diff
    assert _steps(out, "shell") == []
    assert "root:" not in json.dumps([s.output for s in _steps(out, "note")])


def test_a_bad_commit_is_refused_before_any_task(repo: Path) -> None:
    text = _spec(repo, "true")
    bad = text.environment.repository.__class__(path=str(repo), commit="no-such-branch")
    env = text.environment.__class__(**{**_fields(text.environment), "repository": bad})
    target = AgentTarget(None, text.target.agent, env)

    async def go() -> None:
        async with target:
            pass

    with pytest.raises(UserError, match=r"repository\.commit: 'no-such-branch' names no commit"):
        asyncio.run(go())


def test_a_sample_naming_a_bad_commit_loses_only_its_task(repo: Path) -> None:
    record = Record("t", input=_text("x"), metadata={"repository": {"commit": "deadbeef"}})
    with pytest.raises(InfraError, match=r"sample 't': metadata\.repository\.commit"):
        _invoke(_spec(repo, "true"), record)


def test_a_sample_checks_out_its_own_commit(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    git(repo, "commit", "-qam", "fixed")
    fixed = _invoke(_spec(repo, "true"), Record("t", input=_text("x")))
    old = {"repository": {"path": str(repo), "commit": base}}
    broken = _invoke(_spec(repo, "true"), Record("t", input=_text("x"), metadata=old))
    assert fixed.trajectory is not None
    assert broken.trajectory is not None
    assert [c.passed for c in fixed.trajectory.checks] == [True]
    assert [c.passed for c in broken.trajectory.checks] == [False]


def test_a_replay_reapplies_the_diff_and_never_runs_the_agent(repo: Path) -> None:
    spec = _spec(repo, FIX)
    record = Record("t", input=_text("fix it"))
    recorded = _invoke(spec, record)
    assert recorded.cassette is not None
    assert len(recorded.cassette.exchanges) == 1
    replayed = _invoke(spec, record, _Replay({"t": recorded.cassette}))
    assert recorded.trajectory is not None
    assert replayed.trajectory is not None
    assert replayed.trajectory.checks == recorded.trajectory.checks
    # The nonce is fresh randomness: only the recorded diff, re-applied, reproduces it.
    assert _nonce(replayed) == _nonce(recorded)
    assert replayed.trajectory.steps == recorded.trajectory.steps
    other = _spec(repo, FIX + " && true")  # another command is another request: no silent live
    with pytest.raises(InfraError, match="not in the cassette"):
        _invoke(other, record, _Replay({"t": recorded.cassette}))


def test_a_replay_on_the_unconfined_rung_never_executes_the_script(
    repo: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    script = f"echo ran >> {counter} && {FIX}"
    spec = _spec(repo, script)
    spec = _with_isolation(spec, "none")
    before = current_config()
    configure(SandboxConfig(drivers=("none",), min_isolation=Level.NONE))
    try:
        record = Record("t", input=_text("fix it"))
        recorded = _invoke(spec, record)
        assert counter.read_text() == "ran\n"
        assert recorded.cassette is not None
        replayed = _invoke(spec, record, _Replay({"t": recorded.cassette}))
    finally:
        configure(before)
    assert counter.read_text() == "ran\n"  # the script ran once: when recording
    assert recorded.trajectory is not None
    assert replayed.trajectory is not None
    assert [c.passed for c in replayed.trajectory.checks] == [True]
    assert replayed.trajectory.checks == recorded.trajectory.checks


def _nonce(out: TargetOutput) -> str:
    assert out.trajectory is not None
    assert isinstance(out.trajectory.end_state, dict)
    files = out.trajectory.end_state["files"]
    return str(files["NONCE"]["text"])


def _text(s: str) -> Any:
    from evalsi.core import Content

    return Content.of_text(s)


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _with_isolation(spec: Any, level: str) -> Any:
    from dataclasses import replace

    env = spec.environment
    return replace(
        spec, environment=replace(env, sandbox=replace(env.sandbox, min_isolation=level))
    )

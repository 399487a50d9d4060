"""The cli agent's pieces without a sandbox: the commands file it reads (malformed, huge,
hostile), how an exit becomes a stop reason and steps, and the git workspace on the host
(checkout, diff of new, deleted, binary and linked files, re-apply, bad repositories and refs,
the user's repository never written, a sample's repository over the spec's)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from evalsi.agents._cli_agent import (
    COMMAND_CHARS,
    MAX_COMMANDS,
    _steps,
    _stop_reason,
    connect,
    parse_commands,
)
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._git_workspace import Checkout, resolve_revision, task_repository
from evalsi.connectors import InfraError
from evalsi.core import Record, UserError
from evalsi.specs import AgentSpec, CliAgentSpec, EnvironmentSpec, GitWorkspaceSpec
from tests.support.swebench_fixture import git, make_repo

SECTION = CliAgentSpec(command=("sh", "-c", "true"))


def test_reported_commands_are_read_and_bad_lines_noted() -> None:
    data = b"\n".join(
        [
            b'{"command": "ls", "exit_code": 0}',
            b"",
            b"not json",
            b'{"command": 3}',
            b'{"command": "make", "exit_code": true}',
            b'["command"]',
            b'{"command": "pytest", "exit_code": 1, "extra": 1}',
            b'{"command": "no code"}',
        ]
    )
    commands, notes = parse_commands(data, "c.jsonl")
    assert commands == [
        {"command": "ls", "exit_code": 0},
        {"command": "pytest", "exit_code": 1},
        {"command": "no code", "exit_code": None},
    ]
    assert notes == [
        f"c.jsonl:{n}: skipped (expected {{command, exit_code}})" for n in (3, 4, 5, 6)
    ]


def test_an_empty_commands_file_is_no_commands() -> None:
    assert parse_commands(b"", "c") == ([], [])
    assert parse_commands(b"\n\n  \n", "c") == ([], [])


def test_a_flood_of_commands_is_bounded() -> None:
    line = json.dumps({"command": "x" * (COMMAND_CHARS * 3), "exit_code": 0}).encode()
    commands, notes = parse_commands(b"\n".join([line] * (MAX_COMMANDS + 50)), "c")
    assert len(commands) == MAX_COMMANDS
    assert all(len(c["command"]) == COMMAND_CHARS for c in commands)
    assert notes == [f"c: only the first {MAX_COMMANDS} commands are kept"]
    garbage, notes = parse_commands(b"\n".join([b"{"] * 100), "c")
    assert garbage == []
    assert len(notes) == 6
    assert notes[-1] == "c: 100 malformed lines skipped in all"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"exit": "exit", "exit_code": 0}, "final_answer"),
        ({"exit": "exit", "exit_code": 2}, "error"),
        ({"exit": "exit", "exit_code": -9}, "error"),
        ({"exit": "timeout"}, "timeout"),
        ({"exit": "denied", "detail": "seccomp"}, "error"),
        ({"exit": "resource_exceeded", "detail": "memory"}, "error"),
    ],
)
def test_how_the_agent_ended_is_its_stop_reason(answer: dict[str, Any], reason: str) -> None:
    assert _stop_reason(answer) == reason


def test_the_steps_of_one_run() -> None:
    answer = {
        "exit": "resource_exceeded",
        "detail": "memory",
        "exit_code": None,
        "stdout": "out",
        "stderr": "",
        "commands": [{"command": "ls", "exit_code": 0}, {"command": "cc", "exit_code": 1}],
        "notes": ["c:2: skipped"],
        "diff": "",
        "diff_truncated": False,
    }
    steps = _steps(SECTION, answer)
    assert [(s.kind, s.name) for s in steps] == [
        ("agent", "cli"),
        ("tool_call", "shell"),
        ("tool_call", "shell"),
        ("other", "stdout"),
        ("other", "note"),
        ("other", "git_diff"),
    ]
    assert steps[0].error == "resource_exceeded: memory"
    assert [s.error for s in steps[1:3]] == ["", "exit 1"]
    assert steps[1].tool_call is not None
    assert steps[1].tool_call.arguments == {"command": "ls"}


def test_a_cli_agent_without_a_workspace_is_refused() -> None:
    context = ConnectorContext(
        AgentSpec(kind="cli", cli=SECTION),
        EnvironmentSpec(tools=()),
        lambda: None,  # type: ignore[arg-type,return-value]
        None,
        "spec.target.agent.cli",
    )

    async def go() -> None:
        async with connect(SECTION, context):
            pass

    with pytest.raises(UserError, match=r"spec\.target\.agent\.cli: a cli agent runs in"):
        asyncio.run(go())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_repo(path)
    (path / "data.bin").write_bytes(bytes(range(256)))
    os.symlink("calc/__init__.py", path / "link")
    git(path, "add", ".")
    git(path, "commit", "-qm", "binary and link")
    return path


def _checkout(repo: Path, tmp_path: Path, commit: str = "HEAD") -> Checkout:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    c = Checkout(resolve_revision(repo, commit, "r"), ws, tmp_path / "private")
    c.check_out()
    return c


def _objects(repo: Path) -> set[str]:
    return {str(p) for p in (repo / ".git" / "objects").rglob("*") if p.is_file()}


def test_a_checkout_has_the_files_and_no_git(repo: Path, tmp_path: Path) -> None:
    c = _checkout(repo, tmp_path)
    ws = c.workspace
    assert sorted(p.name for p in ws.iterdir()) == [
        ".gitignore",
        "calc",
        "data.bin",
        "link",
        "tests",
    ]
    assert os.readlink(ws / "link") == "calc/__init__.py"
    assert (ws / "data.bin").read_bytes() == bytes(range(256))
    assert c.diff() == ("", False)


def test_the_diff_has_every_kind_of_change_and_applies_to_a_fresh_checkout(
    repo: Path, tmp_path: Path
) -> None:
    before = _objects(repo)
    c = _checkout(repo, tmp_path / "a")
    ws = c.workspace
    (ws / "calc" / "__init__.py").write_text("changed\n")
    (ws / "data.bin").write_bytes(bytes(range(255, -1, -1)))
    (ws / "tests" / "test_calc.py").unlink()
    (ws / "new" / "deep").mkdir(parents=True)
    (ws / "new" / "deep" / "file.txt").write_text("new\n")
    (ws / "new" / "empty").write_text("")
    (ws / ".evalsi").mkdir()
    (ws / ".evalsi" / "task.md").write_text("scratch")
    (ws / "calc" / "__pycache__").mkdir()
    (ws / "calc" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    os.mkfifo(ws / "fifo")
    os.symlink("/etc/passwd", ws / "escape")
    diff, cut = c.diff()
    assert not cut
    assert "+changed" in diff
    assert "GIT binary patch" in diff
    assert "deleted file mode" in diff
    assert "new/deep/file.txt" in diff
    assert "new/empty" in diff
    assert ".evalsi" not in diff
    assert "__pycache__" not in diff
    assert "fifo" not in diff
    assert "+/etc/passwd" in diff
    assert "root:" not in diff
    assert _objects(repo) == before  # the user's repository is never written
    fresh = _checkout(repo, tmp_path / "b")
    fresh.apply(diff)
    assert fresh.diff()[0] == diff
    assert (fresh.workspace / "data.bin").read_bytes() == bytes(range(255, -1, -1))


def test_a_diff_past_its_cap_is_cut_and_marked(repo: Path, tmp_path: Path) -> None:
    c = _checkout(repo, tmp_path)
    (c.workspace / "big.txt").write_text("line\n" * 100_000)
    diff, cut = c.diff(max_bytes=10_000)
    assert cut
    assert len(diff.encode()) == 10_000


def test_a_diff_that_does_not_apply_is_a_lost_replay(repo: Path, tmp_path: Path) -> None:
    c = _checkout(repo, tmp_path)
    with pytest.raises(InfraError, match="recorded diff does not apply"):
        c.apply("diff --git a/nope b/nope\n--- a/nope\n+++ b/nope\n@@ -1 +1 @@\n-a\n+b\n")


def test_the_diff_never_walks_into_a_symlinked_directory(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "__init__.py").write_text("host file\n")
    c = _checkout(repo, tmp_path / "t")
    calc = c.workspace / "calc"
    for p in calc.iterdir():
        p.unlink()
    calc.rmdir()
    os.symlink(outside, calc)
    diff, _ = c.diff()
    assert "host file" not in diff
    assert "deleted file mode 100644" in diff  # calc/__init__.py is gone, not replaced
    fresh = _checkout(repo, tmp_path / "f")
    fresh.apply(diff)  # a replay rebuilds the same workspace
    assert fresh.diff()[0] == diff
    assert (fresh.workspace / "calc").is_symlink()


@pytest.mark.parametrize(
    ("commit", "message"),
    [
        ("no-such-branch", r"r\.commit: 'no-such-branch' names no commit"),
        ("--output=/tmp/x", r"r\.commit: '--output=/tmp/x' is not a revision"),
        ("a b", r"r\.commit: 'a b' is not a revision"),
        ("HEAD^{tree}", r"r\.commit: 'HEAD\^\{tree\}' names no commit"),
        ("0" * 40, "names no commit"),
    ],
)
def test_bad_revisions_are_refused(repo: Path, commit: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve_revision(repo, commit, "r")


def test_a_directory_that_is_no_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"r\.path: not a git repository"):
        resolve_revision(tmp_path, "HEAD", "r")
    with pytest.raises(UserError, match=r"r\.path: no such directory"):
        resolve_revision(tmp_path / "nope", "HEAD", "r")


def test_a_branch_is_resolved_again_and_an_id_once(repo: Path) -> None:
    first = resolve_revision(repo, "main", "r")
    (repo / "x").write_text("x")
    git(repo, "add", "x")
    git(repo, "commit", "-qm", "x")
    assert resolve_revision(repo, "main", "r").sha != first.sha
    assert resolve_revision(repo, first.sha, "r").sha == first.sha


def test_a_samples_repository_overrides_the_specs() -> None:
    spec = GitWorkspaceSpec("/repos/a", "v1")
    assert task_repository(None, None) is None
    assert task_repository(spec, None) == (spec, "spec.environment.repository")
    plain = Record("s", metadata={})
    assert task_repository(spec, plain) == (spec, "spec.environment.repository")
    own = Record("s", metadata={"repository": {"path": "/repos/b", "commit": "abc"}})
    assert task_repository(spec, own) == (
        GitWorkspaceSpec("/repos/b", "abc"),
        "sample 's': metadata.repository",
    )
    commit_only = Record("s", metadata={"repository": {"commit": "abc"}})
    named = task_repository(spec, commit_only)
    assert named is not None
    assert named[0] == GitWorkspaceSpec("/repos/a", "abc")
    for bad in ("x", {"path": 3}, {"commit": ["a"]}, {"path": ""}):
        with pytest.raises(InfraError, match=r"sample 's': metadata\.repository"):
            task_repository(spec, Record("s", metadata={"repository": bad}))
    with pytest.raises(InfraError):
        task_repository(None, commit_only)  # no path anywhere


def test_a_recorded_diff_cannot_write_through_a_link_it_makes(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    hostile = (
        f"diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n"
        f"@@ -0,0 +1 @@\n+{outside}\n\\ No newline at end of file\n"
        "diff --git a/evil/planted b/evil/planted\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/evil/planted\n@@ -0,0 +1 @@\n+planted\n"
    )
    c = _checkout(repo, tmp_path / "t")
    with pytest.raises(InfraError, match="does not apply"):
        c.apply(hostile)
    assert list(outside.iterdir()) == []
    with pytest.raises(InfraError, match="does not apply"):
        c.apply(
            "diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n"
            "@@ -0,0 +1 @@\n+x\n"
        )
    assert not (tmp_path / "t" / "x").exists()


def test_a_tracked_file_turned_into_a_fifo_is_a_deletion_not_a_lost_task(
    repo: Path, tmp_path: Path
) -> None:
    c = _checkout(repo, tmp_path)
    target = c.workspace / "tests" / "test_calc.py"
    target.unlink()
    os.mkfifo(target)  # git refuses to hash it; the diff must not fail for it
    (c.workspace / "calc" / "__init__.py").write_text("changed\n")
    diff, _ = c.diff()
    assert "diff --git a/tests/test_calc.py b/tests/test_calc.py\ndeleted file mode" in diff
    assert "+changed" in diff

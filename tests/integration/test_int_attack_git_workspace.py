"""A sandboxed agent's ``.gitattributes`` must not make the host's git run a program: the
diff evalsi takes on the host reads no filter driver from the user's global git config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from evalsi.agents._git_workspace import Checkout, resolve_revision


def test_a_planted_gitattributes_runs_no_filter_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, workspace, private = (tmp_path / n for n in ("repo", "home", "ws", "git"))
    for d in (repo, home, workspace):
        d.mkdir()
    marker = tmp_path / "RAN-ON-HOST"
    (home / ".gitconfig").write_text(f'[filter "lfs"]\n\tclean = "touch {marker}; cat"\n')
    monkeypatch.setenv("HOME", str(home))
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    (repo / "a.txt").write_text("hi\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    checkout = Checkout(resolve_revision(repo, "HEAD", "repo"), workspace, private)
    checkout.check_out()
    # what the agent does in its sandbox
    (workspace / ".gitattributes").write_text("* filter=lfs\n")
    (workspace / "a.txt").write_text("changed\n")
    diff, cut = checkout.diff()
    assert not marker.exists(), "the host's git ran a filter the agent's .gitattributes named"
    assert "+changed" in diff
    assert not cut


@pytest.mark.parametrize("required", [False, True])
def test_a_filter_of_the_repository_s_own_config_runs_neither(
    tmp_path: Path, required: bool
) -> None:
    """git-lfs installed in the repository itself (``git lfs install --local``): its drivers
    are emptied for the host's diff, and a required one cannot fail the task's diff."""
    repo, workspace, private = (tmp_path / n for n in ("repo", "ws", "git"))
    for d in (repo, workspace):
        d.mkdir()
    marker = tmp_path / "RAN-ON-HOST"
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    (repo / "a.txt").write_text("hi\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    for key, value in (
        ("filter.lfs.clean", f"sh -c 'touch {marker}; exit 3'"),
        ("filter.lfs.process", f"sh -c 'touch {marker}; exit 3'"),
        ("filter.lfs.required", "true" if required else "false"),
    ):
        subprocess.run([*git, "config", key, value], check=True)
    checkout = Checkout(resolve_revision(repo, "HEAD", "repo"), workspace, private)
    checkout.check_out()
    (workspace / ".gitattributes").write_text("* filter=lfs\n")
    (workspace / "a.txt").write_text("changed\n")
    diff, _ = checkout.diff()
    assert not marker.exists(), "the host's git ran the repository's own filter driver"
    assert "+changed" in diff

"""A git repository at a commit as the task's workspace (``spec.environment.repository``, or a
sample's ``metadata.repository``), and the diff the agent made to it.

Git runs on the host, never on anything the agent controls. The checkout is ``git read-tree
--reset -u`` into the workspace with an index of its own, kept outside the workspace; writes
(the intent-to-add entries a diff of new files needs) go to a private object directory with
the repository's objects as an alternate, so the user's repository is never written. The
workspace gets the files and no ``.git``: the agent cannot plant configuration, hooks or an
index that the host's git would then read. ``git diff`` reads the worktree as git always does:
symlinks as links (never followed), a path under a symlinked directory as removed, FIFOs and
devices not listed; its output is read with a cap and a timeout.

Measured on a 2-core machine: the checkout of a small package costs about 8 ms (one ``git``
process) and the diff about 6 ms (two or three), so the workspace adds little to a task
whose sandboxed agent and tests take 100 ms or more. A full-hex commit is resolved once per
process; a branch or ``HEAD`` once per task (it may move).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import io
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.connectors import InfraError
from evalsi.core import Record, UserError
from evalsi.specs import GitWorkspaceSpec

DIFF_BYTES = 1 << 20
"""The diff kept (in the end state and the cassette); past it the diff is cut and marked, and
a replay of that task is refused."""
GIT_SECONDS = 120.0
"""One git command's wall-clock limit (a checkout of a large repository included)."""
UNTRACKED_FILES = 10_000
"""New files the diff lists; the workspace's own file limit is of that order."""

FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SAFE = (  # settings that would run programs or change what a checkout writes
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false",
    "-c", "core.symlinks=true", "-c", "diff.noprefix=false", "-c", "color.ui=false",
)  # fmt: skip
_resolved: dict[tuple[str, str], Revision] = {}

_current: contextvars.ContextVar[Checkout | None] = contextvars.ContextVar(
    "evalsi_task_checkout", default=None
)


class GitFailed(Exception):
    """A git command failed: ``message`` is its stderr (cut)."""


@dataclass(frozen=True, slots=True)
class Revision:
    """A commit of a repository on this host: its git directory, object store and full id."""

    path: Path
    git_dir: Path
    objects: Path
    sha: str


def _run(
    args: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    max_bytes: int = DIFF_BYTES,
) -> tuple[bytes, bool]:
    """``git args`` with its stdout read up to ``max_bytes`` (the flag: it had more), killed
    after ``GIT_SECONDS``; ``GitFailed`` on a non-zero exit or the timeout."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # no system or global config: a .gitattributes the agent plants names filter drivers,
    # and one defined there (git-lfs's, say) would run on the host on the agent's files
    base.update({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
                 "GIT_CONFIG_GLOBAL": os.devnull})  # fmt: skip
    with subprocess.Popen(
        ["git", *_SAFE, *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**base, **(env or {})},
        cwd=cwd,
    ) as proc:
        timer = threading.Timer(GIT_SECONDS, proc.kill)
        timer.start()
        try:
            if stdin is not None:  # small answers (add, apply): no cap needed
                out, err = proc.communicate(stdin)
            else:
                out, err = _bounded(proc, max_bytes)
        finally:
            expired = not timer.is_alive()
            timer.cancel()
        cut = len(out) > max_bytes
        if expired and proc.returncode != 0:
            raise GitFailed(f"git {args[0]}: no answer in {GIT_SECONDS:.0f}s")
        if proc.returncode != 0 and not cut:
            text = err.decode(errors="replace").strip()[-400:]
            raise GitFailed(text or f"git {args[0]} exited {proc.returncode}")
    return out[:max_bytes], cut


@functools.lru_cache(maxsize=64)
def _no_filters(git_dir: str) -> dict[str, str]:
    """Every filter driver the repository's own config defines, emptied and made optional (as
    ``GIT_CONFIG_*`` variables): an agent's planted ``.gitattributes`` could name one (git-lfs's,
    after ``git lfs install --local``) and have the host run it on the agent's files, or fail
    the diff on purpose with a required one."""
    try:
        out, _ = _run(
            ["--git-dir", git_dir, "config", "--get-regexp", r"^filter\..*\.[a-z]+$"],
            max_bytes=1 << 16,
        )
    except GitFailed:  # none defined (git exits 1)
        return {}
    names = sorted(
        {
            line.split(" ", 1)[0][len("filter.") :].rpartition(".")[0]
            for line in out.decode(errors="replace").splitlines()
            if line.startswith("filter.")
        }
    )
    pairs = [
        (f"filter.{name}.{key}", "false" if key == "required" else "")
        for name in names
        if name
        for key in ("clean", "smudge", "process", "required")
    ]
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env if pairs else {}


def _bounded(proc: subprocess.Popen[bytes], max_bytes: int) -> tuple[bytes, bytes]:
    stdout, stderr = proc.stdout, proc.stderr
    assert isinstance(stdout, io.BufferedReader)
    assert stderr is not None
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes and (chunk := stdout.read1(1 << 16)):
        chunks.append(chunk)
        size += len(chunk)
    if size > max_bytes:
        proc.kill()
    err = stderr.read(1 << 16)  # git says little there; a full pipe would only stall it
    proc.wait()
    return b"".join(chunks), err


def resolve_revision(path: str | Path, commit: str, where: str) -> Revision:
    """``commit`` of the repository at ``path``; ``UserError`` naming ``where`` when it is no
    repository or the revision names no commit there."""
    commit = commit or "HEAD"
    key = (str(path), commit)
    cached = _resolved.get(key)
    if cached is not None:
        return cached
    if commit.startswith("-") or "\0" in commit or any(c.isspace() for c in commit):
        raise UserError(f"{where}.commit: {commit!r} is not a revision")
    repo = Path(path)
    if not repo.is_dir():
        raise UserError(f"{where}.path: no such directory: {repo}")
    try:
        out, _ = _run(
            [
                "-C", str(repo), "rev-parse", "--path-format=absolute", "--git-dir",
                "--git-path", "objects", "--verify", "--end-of-options", f"{commit}^{{commit}}",
            ],
            max_bytes=1 << 16,
        )  # fmt: skip
    except GitFailed as e:
        message = str(e)
        if "not a git repository" in message:
            raise UserError(f"{where}.path: not a git repository: {repo}") from None
        raise UserError(
            f"{where}.commit: {commit!r} names no commit in {repo}",
            hint="give a commit id, a branch or a tag the repository has",
        ) from None
    git_dir, objects, sha = out.decode().split()
    revision = Revision(repo, Path(git_dir), Path(objects), sha)
    if FULL_SHA.fullmatch(commit):  # an id never moves; a branch may
        _resolved[key] = revision
    return revision


class Checkout:
    """One task's checkout: the revision's files in ``workspace``, git's index and any object
    it writes in ``private`` (outside the workspace, invisible to the agent)."""

    def __init__(self, revision: Revision, workspace: Path, private: Path) -> None:
        self.revision = revision
        self.workspace = workspace
        self.private = private
        (private / "objects").mkdir(parents=True, exist_ok=True)
        (private / "exclude").write_text("/.evalsi/\n")
        self.env = {
            "GIT_DIR": str(revision.git_dir),
            "GIT_WORK_TREE": str(workspace),
            "GIT_INDEX_FILE": str(private / "index"),
            "GIT_OBJECT_DIRECTORY": str(private / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(revision.objects),
            **_no_filters(str(revision.git_dir)),
        }

    def check_out(self) -> None:
        """The revision's files into the (empty) workspace; ``InfraError("sandbox")`` when
        they do not fit (the sandbox's disk or file limits)."""
        try:
            _run(["read-tree", "--reset", "-u", self.revision.sha], env=self.env, cwd=self.private)
        except GitFailed as e:
            raise InfraError(
                "sandbox",
                f"workspace: checking out {self.revision.path} at {self.revision.sha[:12]}: {e}",
            ) from None

    def diff(self, max_bytes: int = DIFF_BYTES) -> tuple[str, bool]:
        """What changed in the workspace since the checkout (new files included, ``.evalsi/``
        not), as a binary-safe patch ``git apply`` takes; and whether it was cut."""
        args = ["-c", f"core.excludesFile={self.private / 'exclude'}"]
        listed, _ = _run(
            [*args, "ls-files", "-z", "--others", "--exclude-standard"],
            env=self.env,
            cwd=self.workspace,
            max_bytes=64 << 20,
        )
        new = [p for p in listed.split(b"\0") if p and self._plain(p)][:UNTRACKED_FILES]
        if new:
            _run(
                [*args, "add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul"],
                env=self.env,
                cwd=self.workspace,
                stdin=b"\0".join(new),
            )
        command = [*args, "diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-renames"]
        command += [self.revision.sha, "--"]
        try:
            out, cut = _run(command, env=self.env, cwd=self.workspace, max_bytes=max_bytes)
        except GitFailed as e:
            if "unsupported file type" not in str(e) or not self._forget_special(args):
                raise
            out, cut = _run(command, env=self.env, cwd=self.workspace, max_bytes=max_bytes)
        return out.decode(errors="replace"), cut

    def _forget_special(self, args: list[str]) -> bool:
        """Drop from the index the tracked paths the agent replaced with a FIFO, socket or
        device (git cannot hash them and refuses the whole diff): they show as deleted, so a
        hostile agent cannot turn its task into an infrastructure error."""
        tracked, _ = _run([*args, "ls-files", "-z"], env=self.env, cwd=self.workspace,
                          max_bytes=64 << 20)  # fmt: skip
        special = [p for p in tracked.split(b"\0") if p and self._special(p)]
        if special:
            _run(
                [*args, "update-index", "--force-remove", "-z", "--stdin"],
                env=self.env,
                cwd=self.workspace,
                stdin=b"\0".join(special) + b"\0",
            )
        return bool(special)

    def _special(self, relative: bytes) -> bool:
        try:
            mode = os.lstat(os.path.join(os.fsencode(self.workspace), relative)).st_mode
        except OSError:
            return False
        return not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode))

    def _plain(self, relative: bytes) -> bool:
        """A new file git may read: a regular file or a symlink (read as a link)."""
        try:
            mode = os.lstat(os.path.join(os.fsencode(self.workspace), relative)).st_mode
        except OSError:
            return False
        return stat.S_ISREG(mode) or stat.S_ISLNK(mode)

    def apply(self, diff: str) -> None:
        """Re-apply a recorded diff to this (fresh) checkout: a replay's workspace."""
        if not diff:
            return
        try:
            _run(["apply", "--binary", "--whitespace=nowarn", "-"], env=self.env,
                 cwd=self.workspace, stdin=diff.encode())  # fmt: skip
        except GitFailed as e:
            raise InfraError("cassette", f"replay: the recorded diff does not apply: {e}") from None

    def close(self) -> None:
        shutil.rmtree(self.private, ignore_errors=True)


def task_repository(
    spec: GitWorkspaceSpec | None, sample: Record | None
) -> tuple[GitWorkspaceSpec, str] | None:
    """The task's repository and where it was named: the sample's ``metadata.repository``
    (``{path, commit}``; a relative path is from the current directory; no path: the spec's
    repository, no commit: ``HEAD``) over the spec's."""
    given: Any = sample.metadata.get("repository") if sample is not None else None
    if given is None:
        return (spec, "spec.environment.repository") if spec is not None else None
    assert sample is not None
    where = f"sample {sample.id!r}: metadata.repository"
    path = given.get("path", spec.path if spec else None) if isinstance(given, dict) else None
    commit = given.get("commit") or "HEAD" if isinstance(given, dict) else None
    if not isinstance(path, str) or not path or not isinstance(commit, str):
        raise InfraError(
            "sandbox", f"workspace: {where}: expected {{path: a directory, commit: a revision}}"
        )
    return GitWorkspaceSpec(str(Path(path).expanduser().absolute()), commit), where


async def check_out(
    spec: GitWorkspaceSpec | None, sample: Record | None, workspace: Path
) -> Checkout | None:
    """The task's repository checked out into ``workspace`` (``None``: it has none). A bad
    repository or commit of a sample loses that task (``InfraError``), naming the sample."""
    named = task_repository(spec, sample)
    if named is None:
        return None
    repo, where = named
    try:
        revision = await asyncio.to_thread(resolve_revision, repo.path, repo.commit, where)
    except UserError as e:
        if where.startswith("spec."):
            raise
        raise InfraError("sandbox", f"workspace: {e.message}") from None
    private = _private_dir(workspace)
    checkout = Checkout(revision, workspace, private)
    try:
        await asyncio.to_thread(checkout.check_out)
    except BaseException:
        checkout.close()
        raise
    return checkout


def _private_dir(workspace: Path) -> Path:
    """Beside the workspace on the sandbox's own mount when it has one (removed with it, never
    mounted into it), else a private temporary directory."""
    parent = workspace.parent
    if workspace.name == "workspace" and parent.name.startswith("evalsi-sandbox-"):
        private = parent / "git"
        private.mkdir(mode=0o700)
        return private
    return Path(tempfile.mkdtemp(prefix="evalsi-git-"))


def current_checkout() -> Checkout | None:
    """The running task's checkout, if its workspace is a repository."""
    return _current.get()


@contextlib.contextmanager
def checked_out(checkout: Checkout | None) -> Iterator[None]:
    """Make ``checkout`` the current task's for the calls made inside."""
    token = _current.set(checkout)
    try:
        yield
    finally:
        _current.reset(token)

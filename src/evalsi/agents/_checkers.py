"""The task's state around the agent: fixtures in before it starts, and, once it stops, a
snapshot of the workspace (the end state) and the checkers' verdicts on it.

Checkers are the harness judging the environment, not the agent reporting on itself: a command's
exit code in the task's sandbox, a JSON file's content, or a Python function over the workspace.
A checker that cannot run (the sandbox broke, the function raised) loses the task to
infrastructure: a verdict nobody could reach is never scored as the agent's failure.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from evalsi.connectors import InfraError, load_callable
from evalsi.core import Check, JsonValue, Record, UserError
from evalsi.sandbox import AsyncSandbox, SandboxFileError
from evalsi.specs import CheckerSpec, fixture_problem

SNAPSHOT_FILES = 200
"""Files listed in the end state; more are counted, not listed."""
INLINE_BYTES = 16 * 1024
"""A file up to this size has its content in the end state (text, or parsed JSON)."""
SNAPSHOT_SCAN = 100_000
"""Entries (files and directories) the snapshot looks at; about a second on a local disk."""
HASH_BYTES = 256 << 20
"""Bytes the snapshot hashes in all (about half a second); a file past it gets its size only."""
DETAIL_CHARS = 300


def task_fixtures(base: Mapping[str, Any], sample: Record | None) -> dict[str, Any]:
    """The spec's fixture files overlaid, path by path, with the sample's ``fixtures``
    (metadata); ``UserError`` naming the sample when its fixtures are malformed."""
    files = dict(base)
    extra = sample.metadata.get("fixtures") if sample is not None else None
    if extra is not None:
        assert sample is not None
        problem = fixture_problem(extra)
        if problem:
            raise UserError(f"sample {sample.id!r}: fixtures: {problem}")
        files.update(extra["files"])
        problem = fixture_problem({"files": files})  # the overlay may clash with the spec's
        if problem:
            raise UserError(f"sample {sample.id!r}: fixtures over the spec's: {problem}")
    return files


async def write_fixtures(sandbox: AsyncSandbox, files: Mapping[str, Any]) -> None:
    """The task's fixture files into its workspace; one that cannot be written (the workspace
    is full, a name the filesystem refuses) loses the task to infrastructure, naming it."""
    for path, content in files.items():
        data = content.encode() if isinstance(content, str) else orjson.dumps(content)
        try:
            await sandbox.copy_in(data, path)
        except (OSError, SandboxFileError) as e:
            raise InfraError("sandbox", f"fixtures: cannot write {path!r}: {e}") from None


def snapshot(root: Path) -> dict[str, JsonValue]:
    """The workspace as the agent left it: each file's size and sha256, small ones' content
    (parsed when ``.json``); symlinks by target, never followed.

    The workspace is hostile (a sandboxed program wrote it) and this runs on the host, so it
    stays bounded however the tree looks: it walks iteratively (a directory 10,000 deep is no
    RecursionError), stops looking after ``SNAPSHOT_SCAN`` entries, hashes at most
    ``HASH_BYTES`` in all (a sparse file of terabytes costs nothing to make), opens only regular
    files and with ``O_NOFOLLOW | O_NONBLOCK`` (a file swapped for a link or a FIFO since it was
    listed is refused, never followed or waited on), shows names that are not UTF-8 with
    ``\\x..`` escapes (the record is JSON), and reports what it cannot read instead of failing.
    """
    files: dict[str, JsonValue] = {}
    count = seen = 0
    budget = [HASH_BYTES]
    stack = [""]
    while stack and seen < SNAPSHOT_SCAN:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = sorted(itertools.islice(it, SNAPSHOT_SCAN - seen), key=_by_name)
        except OSError as e:
            if rel_dir:
                files[_name(rel_dir)] = {"error": f"cannot list: {e.strerror}"}
            continue
        seen += len(entries)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(rel)
                continue
            count += 1
            if count <= SNAPSHOT_FILES:
                files[_name(rel)] = _describe(root / rel, budget)
        stack.extend(reversed(subdirs))
    out: dict[str, JsonValue] = {"files": files}
    if count > SNAPSHOT_FILES:
        out["unlisted_files"] = count - SNAPSHOT_FILES
    if stack or seen >= SNAPSHOT_SCAN:
        out["scan_stopped"] = f"after {SNAPSHOT_SCAN} entries"
    return out


def _by_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _name(rel: str) -> str:
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _describe(path: Path, budget: list[int]) -> JsonValue:
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            return {"symlink": _name(os.readlink(path))}
        if not stat.S_ISREG(st.st_mode):
            return {"kind": "special"}
        entry: dict[str, JsonValue] = {"size": st.st_size}
        if st.st_size > budget[0]:
            entry["sha256"] = None  # over what is left of HASH_BYTES: size only
            return entry
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return {"kind": "special"}
            digest = hashlib.sha256()
            head = b""
            while budget[0] > 0 and (chunk := f.read(min(1 << 16, budget[0]))):
                budget[0] -= len(chunk)
                if len(head) <= INLINE_BYTES:
                    head += chunk
                digest.update(chunk)
            if f.read(1):  # grew past the budget since the look
                entry["sha256"] = None
                return entry
    except OSError as e:
        return {"error": f"cannot read: {e.strerror}"}
    entry["sha256"] = digest.hexdigest()
    if st.st_size <= INLINE_BYTES:
        try:
            text = head.decode()
        except UnicodeDecodeError:
            return entry
        if path.suffix == ".json":
            try:
                entry["json"] = orjson.loads(text)
                return entry
            except orjson.JSONDecodeError:
                pass
        entry["text"] = text
    return entry


def contains(got: Any, want: Any, at: str = "$") -> str:
    """Where ``got`` fails to hold ``want`` (``""``: it holds it): an object holds every key
    ``want`` names (recursively), anything else must be equal (``1`` equals ``1.0``)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{at}: expected an object, got {_show(got)}"
        for key, value in want.items():
            if key not in got:
                return f"{at}.{key}: missing"
            problem = contains(got[key], value, f"{at}.{key}")
            if problem:
                return problem
        return ""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{at}: expected {_show(want)}, got {_show(got)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            problem = contains(g, w, f"{at}[{i}]")
            if problem:
                return problem
        return ""
    if isinstance(got, bool) != isinstance(want, bool) or got != want:
        return f"{at}: expected {_show(want)}, got {_show(got)}"
    return ""


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode() if value is not None else "null"
    return text if len(text) <= 80 else text[:77] + "..."


class Checker:
    """One checker of the spec, ready to run on a task's sandbox."""

    def __init__(self, spec: CheckerSpec, where: str) -> None:
        self.spec = spec
        self.where = where
        self.fn: Any = None
        if spec.kind == "python":
            try:
                self.fn = load_callable(spec.function)
            except UserError as e:
                message = e.message.replace("python target", "checker")
                raise UserError(f"{where}.python: {message}", hint=e.hint) from None

    async def check(self, sandbox: AsyncSandbox, sample: Record | None) -> Check:
        s = self.spec
        if s.kind == "exit_code":
            return await self._exit_code(sandbox)
        if s.kind == "json_file":
            return await self._json_file(sandbox, sample)
        return await self._python(sandbox, sample)

    async def _exit_code(self, sandbox: AsyncSandbox) -> Check:
        s = self.spec
        result = await sandbox.exec(list(s.command))
        outcome = result.outcome
        if outcome.is_infra:
            raise InfraError("sandbox", f"{self.where}: the sandbox failed: {outcome.detail}")
        if outcome.kind != "exit":
            return Check(s.name, False, f"{outcome.kind}: {outcome.detail}"[:DETAIL_CHARS])
        tail = result.stderr[-DETAIL_CHARS:].decode(errors="replace").strip()
        detail = f"exit {outcome.code} (expected {s.expect})" + (f": {tail}" if tail else "")
        return Check(s.name, outcome.code == s.expect, detail[:DETAIL_CHARS])

    async def _json_file(self, sandbox: AsyncSandbox, sample: Record | None) -> Check:
        s = self.spec
        want = s.expect if not s.expect_from else _expected(s.expect_from, sample, self.where)
        try:
            data = await sandbox.copy_out(s.path)
        except (SandboxFileError, OSError) as e:
            return Check(s.name, False, f"{s.path}: cannot read: {e}"[:DETAIL_CHARS])
        try:
            got = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            return Check(s.name, False, f"{s.path}: not JSON: {e}"[:DETAIL_CHARS])
        problem = contains(got, want)
        return Check(s.name, not problem, (problem or f"{s.path} holds the expected value"))

    async def _python(self, sandbox: AsyncSandbox, sample: Record | None) -> Check:
        s = self.spec
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(sandbox.workspace, sample)
            else:
                value = await asyncio.to_thread(self.fn, sandbox.workspace, sample)
        except Exception as e:  # noqa: BLE001 - the user's checker: reported, never scored
            raise InfraError(
                "checker", f"{self.where}: checker {s.function} raised {type(e).__name__}: {e}"
            ) from None
        if isinstance(value, Check):
            return value
        if isinstance(value, bool):
            return Check(s.name, value)
        if (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], bool)
            and isinstance(value[1], str)
        ):
            return Check(s.name, value[0], value[1][:DETAIL_CHARS])
        raise InfraError(
            "checker",
            f"{self.where}: checker {s.function} returned {type(value).__name__}; expected "
            "true/false or (passed, detail)",
        )


def _expected(source: str, sample: Record | None, where: str) -> Any:
    if sample is None:
        raise InfraError("checker", f"{where}: expectFrom needs the sample")
    if source == "reference":
        if sample.reference is None:
            raise UserError(
                f"sample {sample.id!r}: {where}: expectFrom reference, but no reference"
            )
        return sample.reference.value
    key = source.removeprefix("metadata.")
    if key not in sample.metadata:
        raise UserError(f"sample {sample.id!r}: {where}: expectFrom {source}, but no such key")
    return sample.metadata[key]

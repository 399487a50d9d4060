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
    return files


async def write_fixtures(sandbox: AsyncSandbox, files: Mapping[str, Any]) -> None:
    for path, content in files.items():
        data = content.encode() if isinstance(content, str) else orjson.dumps(content)
        await sandbox.copy_in(data, path)


def snapshot(root: Path) -> dict[str, JsonValue]:
    """The workspace as the agent left it: each file's size and sha256, small ones' content
    (parsed when ``.json``); symlinks by target, never followed."""
    files: dict[str, JsonValue] = {}
    count = 0
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if (Path(directory) / d).is_symlink()]:
            count += 1
            if count > SNAPSHOT_FILES:
                continue
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            files[rel] = _describe(path)
    out: dict[str, JsonValue] = {"files": files}
    if count > SNAPSHOT_FILES:
        out["unlisted_files"] = count - SNAPSHOT_FILES
    return out


def _describe(path: Path) -> JsonValue:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return {"symlink": os.readlink(path)}
    if not stat.S_ISREG(st.st_mode):
        return {"kind": "special"}
    entry: dict[str, JsonValue] = {"size": st.st_size}
    digest = hashlib.sha256()
    head = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            if len(head) <= INLINE_BYTES:
                head += chunk
            digest.update(chunk)
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

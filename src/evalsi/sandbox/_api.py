"""``Sandbox``: a private workspace plus the driver the ladder chose for a spec.

Files cross the boundary only through ``copy_in`` and ``copy_out``, which treat the workspace
as hostile (the program may have planted symlinks, FIFOs or huge files there): every path is
relative and stays inside, every component is opened with ``O_NOFOLLOW`` relative to its
parent's descriptor, and only regular files are read or replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from evalsi.core import UserError
from evalsi.sandbox._config import current_config
from evalsi.sandbox._driver import Driver
from evalsi.sandbox._ladder import Ladder, default_ladder
from evalsi.sandbox._types import ExecResult, Isolation, OutputCallback, SandboxSpec
from evalsi.sandbox._workspace import create as create_workspace
from evalsi.sandbox._workspace import remove as remove_workspace
from evalsi.sandbox._workspace import remove_tree

DEFAULT_COPY_OUT_BYTES = 16 << 20


class SandboxFileError(UserError):
    """A copy path that leaves the workspace, or a file that is not a plain regular file."""


class SandboxEscape(SandboxFileError):
    """A path the confinement refused: it leaves the workspace (absolute, ``..``, a symlink on
    the way) or names a symlink, FIFO, device or socket the program may have planted. Apart
    from the rest (a missing file, a directory, a file over the cap) because a caller acting
    for an agent records it as a denial."""


class Sandbox:
    """One sandbox: create, ``exec`` any number of times, copy files, ``destroy``."""

    def __init__(
        self, spec: SandboxSpec, driver: Driver, workspace: Path, *, base: Path | None = None
    ) -> None:
        """``base``: the directory ``_workspace.create`` made (removed, and unmounted, by
        ``destroy``); without it ``destroy`` removes ``workspace`` itself."""
        self.spec = spec
        self.driver = driver
        self._workspace: Path | None = workspace
        self._base = base
        self._last: Isolation | None = None

    @classmethod
    def create(cls, spec: SandboxSpec | None = None, *, ladder: Ladder | None = None) -> Sandbox:
        """Choose the strongest rung ≥ ``spec.min_isolation`` and the configured floor
        (``sandbox.minIsolation``), or raise SandboxUnavailable; make a private (0700)
        workspace."""
        spec = spec or SandboxSpec()
        floor = max(spec.min_isolation, current_config().min_isolation)
        driver = (ladder or default_ladder()).choose(floor)
        space = create_workspace(spec.resources)  # private; bounded by a tmpfs as root
        return cls(spec, driver, space.path, base=space.base)

    @property
    def workspace(self) -> Path:
        if self._workspace is None:
            raise RuntimeError("this sandbox was destroyed")
        return self._workspace

    @property
    def isolation(self) -> Isolation:
        """How executions here are confined (the last exec's report once one ran)."""
        if self._last is not None:
            return self._last
        return self.driver.isolation_for(self.spec)

    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the workspace; the program's behaviour is an outcome, not an error.

        ``env`` adds variables for this execution over the spec's (the host's are never
        passed); ``on_output(stream, chunk)`` is called from this thread with ``"stdout"`` or
        ``"stderr"`` and each chunk as it arrives, before the call returns the whole result.
        """
        if isinstance(argv, str | bytes) or not argv or not all(isinstance(a, str) for a in argv):
            raise UserError("exec needs a non-empty list of strings, e.g. ['python3', 'main.py']")
        if timeout is not None and timeout <= 0:
            raise UserError(f"timeout must be positive, got {timeout}")
        if env is not None:
            _check_env(env)
        result = self.driver.exec(
            self.spec,
            self.workspace,
            list(argv),
            stdin=stdin,
            timeout_seconds=timeout,
            env=env,
            on_output=on_output,
        )
        self._last = result.isolation
        return result

    def copy_in(self, src: bytes | str | os.PathLike[str], dest: str, *, mode: int = 0o644) -> None:
        """Put bytes, or a regular host file, at ``dest`` (relative) inside the workspace.

        Whatever the program left at ``dest`` (a symlink, a FIFO) is replaced, never followed.
        """
        data = src if isinstance(src, bytes) else _read_host_file(Path(src))
        parts = _relative_parts(dest)
        parent = _open_dir(self.workspace, parts[:-1], create=True)
        try:
            name = parts[-1]
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    raise SandboxFileError(f"copy_in: {dest!r} is a directory in the workspace")
                os.unlink(name, dir_fd=parent)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, mode & 0o777, dir_fd=parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(parent)

    def copy_out(self, relative: str, *, max_bytes: int = DEFAULT_COPY_OUT_BYTES) -> bytes:
        """The bytes of a regular file in the workspace; symlinks, FIFOs, devices, directories
        and files over ``max_bytes`` are refused (``SandboxFileError``), never followed."""
        parts = _relative_parts(relative)
        parent = _open_dir(self.workspace, parts[:-1], create=False)
        try:
            name = parts[-1]
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise SandboxFileError(f"copy_out: {relative!r} does not exist") from None
            _require_regular(st, relative)
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=parent)
            except OSError as e:  # swapped for a symlink since the look: ELOOP
                error = SandboxEscape if e.errno == errno.ELOOP else SandboxFileError
                raise error(f"copy_out: {relative!r} refused: {e.strerror}") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())  # it may have been swapped since the first look
            _require_regular(st, relative)
            if st.st_size > max_bytes:
                raise SandboxFileError(
                    f"copy_out: {relative!r} is {st.st_size} bytes, over the cap of {max_bytes}"
                )
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise SandboxFileError(f"copy_out: {relative!r} grew over the cap of {max_bytes}")
        return data

    def destroy(self) -> None:
        """Remove the workspace, even directories the program made read-only. Idempotent."""
        if self._workspace is None:
            return
        if self._base is not None:
            remove_workspace(self._base)
        else:
            remove_tree(self._workspace)
        self._workspace = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


class AsyncSandbox:
    """The same sandbox for asyncio code: each call runs the sync one on a worker thread."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sync = sandbox

    @classmethod
    async def create(
        cls, spec: SandboxSpec | None = None, *, ladder: Ladder | None = None
    ) -> AsyncSandbox:
        return cls(await asyncio.to_thread(Sandbox.create, spec, ladder=ladder))

    @property
    def isolation(self) -> Isolation:
        return self.sync.isolation

    @property
    def workspace(self) -> Path:
        return self.sync.workspace

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        """As ``Sandbox.exec``; ``on_output`` is called on this event loop's thread."""
        forward: OutputCallback | None = None
        if on_output is not None:
            loop = asyncio.get_running_loop()
            callback = on_output

            def forward(stream: str, chunk: bytes) -> None:
                loop.call_soon_threadsafe(callback, stream, chunk)

        return await asyncio.to_thread(
            self.sync.exec, argv, stdin=stdin, timeout=timeout, env=env, on_output=forward
        )

    async def copy_in(
        self, src: bytes | str | os.PathLike[str], dest: str, *, mode: int = 0o644
    ) -> None:
        await asyncio.to_thread(self.sync.copy_in, src, dest, mode=mode)

    async def copy_out(self, relative: str, *, max_bytes: int = DEFAULT_COPY_OUT_BYTES) -> bytes:
        return await asyncio.to_thread(self.sync.copy_out, relative, max_bytes=max_bytes)

    async def destroy(self) -> None:
        await asyncio.to_thread(self.sync.destroy)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()


def run(
    argv: Sequence[str],
    spec: SandboxSpec | None = None,
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
    files: dict[str, bytes] | None = None,
    ladder: Ladder | None = None,
    env: Mapping[str, str] | None = None,
    on_output: OutputCallback | None = None,
) -> ExecResult:
    """Create a sandbox, copy ``files`` in, run ``argv`` once, destroy it."""
    with Sandbox.create(spec, ladder=ladder) as sandbox:
        for dest, data in (files or {}).items():
            sandbox.copy_in(data, dest)
        return sandbox.exec(argv, stdin=stdin, timeout=timeout, env=env, on_output=on_output)


def _check_env(env: Mapping[str, str]) -> None:
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise UserError(f"env: bad variable name {key!r} (non-empty, no '=' or NUL)")
        if not isinstance(value, str) or "\0" in value:
            raise UserError(f"env: {key} must be a string without NUL, got {value!r}")


def _relative_parts(path: str) -> list[str]:
    """The components of a workspace-relative path; absolute paths and ``..`` are refused."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise SandboxFileError(f"workspace path {path!r}: expected a non-empty relative path")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise SandboxEscape(f"workspace path {path!r} is absolute; give it relative")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise SandboxFileError(f"workspace path {path!r}: expected a file's relative path")
    if ".." in parts:
        raise SandboxEscape(f"workspace path {path!r} leaves the workspace (no '..')")
    return parts


def _open_dir(root: Path, parts: Sequence[str], *, create: bool) -> int:
    """A descriptor of ``root/parts…`` reached without following any symlink."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    try:
        for i, part in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                where = "/".join(parts[: i + 1])
                link = _is_symlink(part, fd)
                raise (SandboxEscape if link else SandboxFileError)(
                    f"workspace path {where!r} is not a plain directory ({e.strerror}); "
                    "symlinks are never followed"
                ) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _require_regular(st: os.stat_result, relative: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        error = SandboxFileError if stat.S_ISDIR(st.st_mode) else SandboxEscape
        raise error(f"copy_out: {relative!r} is a {kind}, not a regular file; refused")


_KINDS = {stat.S_IFLNK: "symlink", stat.S_IFDIR: "directory", stat.S_IFIFO: "FIFO",
          stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
          stat.S_IFBLK: "block device"}  # fmt: skip


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "special file")


def _read_host_file(path: Path) -> bytes:
    try:
        st = path.stat()
    except OSError as e:
        raise SandboxFileError(f"copy_in: cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SandboxFileError(f"copy_in: {path} is a {_kind(st.st_mode)}, not a regular file")
    return path.read_bytes()

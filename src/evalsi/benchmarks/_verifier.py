"""A terminal task's verifier, hidden from the agent until it stops.

Terminal-Bench and Harbor copy a task's tests into the container only once the agent has
finished, so an agent can neither read nor edit them. The imported rows keep the tests in the
sample's metadata (``metadata.verifier.files``), and the spec's first checker,
``stage_verifier``, writes them under ``.evalsi-bench/`` in the workspace after the agent
stops; the next checker (an ``exitCode`` one) runs ``.evalsi-bench/verify.sh`` in the task's
sandbox, which passes exactly when the benchmark would call the task resolved.

``stage_verifier`` runs on the host over a workspace a sandboxed agent wrote, so it trusts no
name in it: whatever the agent left at ``.evalsi-bench`` is removed without following links,
and every directory and file is created fresh through directory descriptors with
``O_NOFOLLOW | O_EXCL``, so a planted link or FIFO is never written through.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from evalsi.core import Record

STAGE_DIR = ".evalsi-bench"
"""Where the verifier lands in the workspace (Terminal-Bench's ``/tests``, Harbor's ``/tests``
and ``/logs``)."""


def stage_verifier(workspace: Path, sample: Record) -> tuple[bool, str]:
    """The sample's verifier files into ``workspace/.evalsi-bench``: the checker before the
    tests run. Fails (the task is not resolved) when the sample has no verifier."""
    files = _verifier_files(sample)
    if files is None:
        return False, f"sample {sample.id!r} has no metadata.verifier.files to stage"
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _remove(root, STAGE_DIR)
        os.mkdir(STAGE_DIR, 0o755, dir_fd=root)
        base = os.open(STAGE_DIR, _DIR_FLAGS, dir_fd=root)
        try:
            for rel, content in files.items():
                _write(base, rel, content)
        finally:
            os.close(base)
    finally:
        os.close(root)
    return True, f"staged {len(files)} verifier files in {STAGE_DIR}/"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _verifier_files(sample: Record) -> dict[str, str] | None:
    verifier: Any = sample.metadata.get("verifier")
    files = verifier.get("files") if isinstance(verifier, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        return None
    return files


def _remove(dir_fd: int, name: str) -> None:
    """``name`` gone from ``dir_fd``, whatever it is; a directory's links are not followed."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # fd-based on Linux: immune to symlink swaps
    else:
        os.unlink(name, dir_fd=dir_fd)


def _write(base: int, rel: str, content: str) -> None:
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"verifier file {rel!r}: not a plain relative path")
    fd = os.dup(base)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        mode = 0o755 if rel.endswith(".sh") else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(parts[-1], flags, mode, dir_fd=fd)
        with os.fdopen(out, "w", encoding="utf-8") as f:
            f.write(content)
    finally:
        os.close(fd)

"""What the namespaced and confined rungs both show a program of the host, and how both hand
a workspace to a pool uid: one profile, so the two rungs cannot drift apart."""

from __future__ import annotations

import os
import re
from pathlib import Path

PATH = "/usr/local/bin:/usr/bin:/bin"
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "mime.types",
)
TOP_LEVEL = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
# A memory overrun as programs report it on stderr (rlimits give ENOMEM, not a kill).
MEMORY = re.compile(rb"\bMemoryError\b|Cannot allocate memory|std::bad_alloc|[Oo]ut of memory")


def hand_over(workspace: Path, uid: int, gid: int) -> None:
    """Give the workspace tree to the slot's uid (never following symlinks), and refuse a
    workspace the slot's uid cannot reach (an ancestor without search permission)."""
    path = workspace.resolve()
    for parent in path.parents:
        st = parent.stat()
        if not (st.st_mode & 0o001 or st.st_uid == uid):
            raise ValueError(
                f"workspace {path} is not reachable by sandbox uids: {parent} is not "
                "searchable by others (create workspaces under a world-searchable directory)"
            )
    os.lchown(path, uid, gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)

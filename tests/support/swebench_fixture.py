"""The guide's example repository and SWE-bench instances (examples/agents-cli/make_repo.py),
for tests: one builder, so the tests exercise what the guide runs."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "agents-cli" / "make_repo.py"
_spec = importlib.util.spec_from_file_location("evalsi_example_make_repo", _PATH)
assert _spec is not None
assert _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

TEST_COMMAND: list[str] = _module.TEST_COMMAND
git: Callable[..., str] = _module.git
make_repo: Callable[[Path], str] = _module.make_repo
make_instances: Callable[[Path], tuple[Path, Path]] = _module.make_instances

__all__ = ["TEST_COMMAND", "git", "make_instances", "make_repo"]

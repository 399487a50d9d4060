"""The registry tests hand the run engine: the built-in evaluators, as the Python API and the
CLI do (the engine never picks a registry itself)."""

from __future__ import annotations

from evalsi.packs import builtin_registry

BUILTINS = builtin_registry(entry_points=False)

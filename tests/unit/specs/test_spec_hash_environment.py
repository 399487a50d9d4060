"""A spec built in code hashes its agent environment: two environments give two hashes (so
``--resume`` refuses a changed one), the same one gives the same hash in every process (its
sets in a fixed order), and a spec without one keeps the hash it always had."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from evalsi.specs import (
    AgentSpec,
    DatasetSpec,
    EnvironmentSpec,
    RunSpec,
    TargetSpec,
    ToolEntrySpec,
)

CODE = """
from evalsi.specs import AgentSpec, DatasetSpec, EnvironmentSpec, RunSpec, TargetSpec, ToolEntrySpec
env = EnvironmentSpec(tools=(ToolEntrySpec(function="a:b"),), deny=frozenset("abcdefgh"))
spec = RunSpec(name="x", target=TargetSpec(kind="agent", agent=AgentSpec()),
               dataset=DatasetSpec("d"), evaluators=(), environment=env)
print(spec.spec_hash)
"""


def _spec(env: EnvironmentSpec | None) -> RunSpec:
    target = TargetSpec(kind="agent", agent=AgentSpec())
    return RunSpec(
        name="x", target=target, dataset=DatasetSpec("d"), evaluators=(), environment=env
    )


def test_environments_that_differ_hash_differently() -> None:
    one = EnvironmentSpec(tools=(ToolEntrySpec(function="a:b"),))
    other = EnvironmentSpec(tools=(ToolEntrySpec(function="a:b"),), deny=frozenset({"b"}))
    assert _spec(one).spec_hash != _spec(other).spec_hash
    assert _spec(one).spec_hash != _spec(None).spec_hash


def test_the_same_environment_hashes_the_same_in_every_process() -> None:
    src = str(Path(__file__).resolve().parents[3] / "src")
    hashes = {
        subprocess.run(
            [sys.executable, "-c", CODE],
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": src},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in (1, 2, 3)
    }
    assert len(hashes) == 1

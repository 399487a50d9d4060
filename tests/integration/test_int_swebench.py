"""SWE-bench through evalsi on real sandboxes: instances over a local repository imported as a
dataset and a spec, run with a CLI agent. The gold patch resolves every instance, the empty
patch none, and a patch that fixes one bug resolves exactly that one; the verdicts are the same
on the namespaced (bwrap) rung and the confined (landlock) rung."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.benchmarks import import_swebench
from evalsi.datasets import read_trajectory
from evalsi.runs._execute import execute_run
from evalsi.sandbox import (
    Level,
    Sandbox,
    SandboxConfig,
    SandboxSpec,
    SandboxUnavailable,
    configure,
    current_config,
)
from evalsi.specs import load_run_spec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.swebench_fixture import TEST_COMMAND, make_instances


def _rung(level: Level, driver: str) -> str:
    before = current_config()
    configure(SandboxConfig(drivers=(driver,)))
    try:
        Sandbox.create(SandboxSpec(min_isolation=level)).destroy()
    except SandboxUnavailable as e:
        return str(e)
    finally:
        configure(before)
    return ""


NO_BWRAP = _rung(Level.NAMESPACED, "bwrap")
NO_LANDLOCK = _rung(Level.CONFINED, "landlock")
pytestmark = pytest.mark.skipif(bool(NO_BWRAP), reason=f"no namespaced sandbox: {NO_BWRAP}")
FIX_ADD = "sed 's/a - b/a + b/' calc/__init__.py > .evalsi/f && cat .evalsi/f > calc/__init__.py"


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_instances(tmp_path_factory.mktemp("swe"))


def _run(
    instances: tuple[Path, Path], out: Path, *, driver: str = "bwrap", **options: Any
) -> dict[str, tuple[bool, str]]:
    repo, src = instances
    level = "namespaced" if driver == "bwrap" else "confined"
    result = import_swebench(
        src,
        out,
        {"acme/calc": repo},
        test_command=TEST_COMMAND,
        log_format="unittest",
        min_isolation=level,
        **options,
    )
    assert result.count == 2
    spec = load_run_spec(result.spec)
    before = current_config()
    configure(SandboxConfig(drivers=(driver,)))
    try:
        db = SqlStore.open(out / "s.db")
        run = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    finally:
        configure(before)
    assert run.tasks == {"ok": 2}
    verdicts = {}
    for row in db.iter_outputs(run.run_id):
        t = read_trajectory(json.loads(row.trajectory or "{}"), stored=True)
        (check,) = t.checks
        verdicts[row.record_id] = (check.passed, check.detail)
    return verdicts


def test_the_gold_patch_resolves_and_the_empty_patch_does_not(
    instances: tuple[Path, Path], tmp_path: Path
) -> None:
    gold = _run(instances, tmp_path / "gold", gold=True)
    empty = _run(instances, tmp_path / "empty")
    assert {k: v[0] for k, v in gold.items()} == {"acme__calc-1": True, "acme__calc-2": True}
    assert {k: v[0] for k, v in empty.items()} == {"acme__calc-1": False, "acme__calc-2": False}
    assert "FAIL_TO_PASS 0/1 passed, PASS_TO_PASS 2/2 passed" in empty["acme__calc-1"][1]


def test_a_patch_that_fixes_one_bug_resolves_only_that_instance(
    instances: tuple[Path, Path], tmp_path: Path
) -> None:
    one = _run(instances, tmp_path / "one", agent_command=("sh", "-c", FIX_ADD))
    assert {k: v[0] for k, v in one.items()} == {"acme__calc-1": True, "acme__calc-2": False}


def test_an_agent_that_breaks_a_passing_test_is_not_resolved(
    instances: tuple[Path, Path], tmp_path: Path
) -> None:
    breaks = FIX_ADD + " && sed -i 's/x \\* 2/x * 3/' calc/__init__.py 2>/dev/null; true"
    result = _run(instances, tmp_path / "breaks", agent_command=("sh", "-c", breaks))
    passed, detail = result["acme__calc-1"]
    assert not passed
    assert "FAIL_TO_PASS 1/1 passed, PASS_TO_PASS 1/2 passed" in detail
    assert "not passing: test_double (tests.test_calc.TestDouble.test_double)" in detail


@pytest.mark.skipif(bool(NO_LANDLOCK), reason=f"no confined (landlock) rung: {NO_LANDLOCK}")
def test_the_verdicts_are_identical_on_bwrap_and_landlock(
    instances: tuple[Path, Path], tmp_path: Path
) -> None:
    for options in ({"gold": True}, {}, {"agent_command": ("sh", "-c", FIX_ADD)}):
        on_bwrap = _run(instances, tmp_path / "b", **options)
        on_landlock = _run(instances, tmp_path / "l", driver="landlock", **options)
        assert on_bwrap == on_landlock

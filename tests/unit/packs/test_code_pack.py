"""The code pack as registered: its evaluators, off by default, manifests whose examples point
at files that exist, and params with the documented defaults."""

from __future__ import annotations

import shlex
from pathlib import Path

from evalsi.evaluators import DEFAULT_PACKS, PackOptIn
from evalsi.packs import BUILTIN_PACKS, builtin_registry

ROOT = Path(__file__).resolve().parents[3]


def test_the_pack_holds_three_evaluators_off_by_default() -> None:
    pack = BUILTIN_PACKS["code"]
    assert [ev.name for ev in pack.evaluators] == ["code-exec-tests", "compile-check", "lint-check"]
    assert "code" not in DEFAULT_PACKS
    opt_in = PackOptIn()
    for ev in pack.evaluators:
        assert not opt_in.allows(ev, explicit=False)
        assert opt_in.allows(ev, explicit=True)
        assert builtin_registry(entry_points=False).resolve(ev.name).ref == (
            f"builtin/{ev.name}@1.0.0"
        )


def test_manifests_and_params() -> None:
    for ev in BUILTIN_PACKS["code"].evaluators:
        m = ev.manifest
        argv = shlex.split(m.example)
        data = argv[argv.index("--data") + 1]
        assert (ROOT / data).is_file(), data
        props = m.params_schema["properties"]
        assert props["min_isolation"]["default"] == "namespaced"
        assert "none" in props["min_isolation"]["enum"]
        assert m.params_schema["required"] == []
    exec_tests = BUILTIN_PACKS["code"].evaluators[0].manifest
    assert [o.name for o in exec_tests.outputs] == ["code-exec-tests", "tests-passed", "pass-at-1"]
    props = exec_tests.params_schema["properties"]
    assert props["timeout_seconds"]["default"] == 5.0
    assert props["language"]["default"] == "python"

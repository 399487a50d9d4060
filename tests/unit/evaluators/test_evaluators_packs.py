"""Packs as values and the project opt-in: only core by default, an explicit name always runs,
and evalsi.yaml's evaluators.packs is validated against the packs that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import SpecError, UserError
from evalsi.evaluators import DEFAULT_PACKS, PackOptIn, pack_of
from evalsi.packs import BUILTIN_PACKS, builtin_registry
from evalsi.server._config import load_config


def test_every_builtin_evaluator_belongs_to_exactly_one_declared_pack() -> None:
    seen: dict[str, str] = {}
    for pack in BUILTIN_PACKS.values():
        assert pack.description, pack.name
        for ev in pack.evaluators:
            assert pack_of(ev) == pack.name, ev.ref
            assert ev.ref not in seen, f"{ev.ref} in {seen.get(ev.ref)} and {pack.name}"
            seen[ev.ref] = pack.name
    assert set(seen) == {ev.ref for ev in builtin_registry(entry_points=False)}


def test_only_core_is_on_by_default_and_an_explicit_name_always_runs() -> None:
    opt_in = PackOptIn()
    assert opt_in.packs == DEFAULT_PACKS == ("core",)
    registry = builtin_registry(entry_points=False)
    exact, judge = registry.resolve("exact-match"), registry.resolve("llm-judge")
    assert opt_in.allows(exact, explicit=False)
    assert not opt_in.allows(judge, explicit=False)
    assert opt_in.allows(judge, explicit=True)
    opt_in.check(judge, explicit=True, where="policy p")
    with pytest.raises(UserError, match="pack 'judge', which this project has not turned on") as e:
        opt_in.check(judge, explicit=False, where="policy p")
    assert "evaluators.packs" in (e.value.hint or "")
    assert PackOptIn(["core", "judge"]).allows(judge, explicit=False)


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_reads_evaluators_packs(tmp_path: Path) -> None:
    assert load_config(None).packs == ("core",)
    cfg = load_config(_config(tmp_path, "evaluators:\n  packs: [core, text, core, safety]\n"))
    assert cfg.packs == ("core", "text", "safety")  # duplicates dropped, order kept
    assert load_config(_config(tmp_path, "evaluators:\n  packs: []\n")).packs == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("evaluators:\n  packs: [core, txt]\n", 'evaluators.packs[1]: unknown pack "txt" (known:'),
        ("evaluators:\n  packs: core\n", "evaluators.packs: expected a list of pack names, got"),
        ("evaluators: [core]\n", "evaluators: expected a mapping with packs"),
        ("evaluators:\n  pack: [core]\n", "evaluators.pack: unknown key (expected packs)"),
    ],
)
def test_bad_pack_config_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        load_config(_config(tmp_path, text))
    assert message in str(e.value)

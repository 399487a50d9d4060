"""The pack index (start-up, issue 16): the registry knows every built-in evaluator by name from
``PACK_INDEX`` and imports a pack only when one of its evaluators is used. The index is checked
here against the packs' real modules, so it cannot drift from them."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from collections.abc import Callable

import pytest

import evalsi.packs
from evalsi.core import UnknownEvaluatorError, UserError
from evalsi.evaluators import Evaluator, Registry, evaluator
from evalsi.packs import PACK_INDEX, builtin_registry


@pytest.mark.parametrize("pack", list(PACK_INDEX))
def test_the_index_names_exactly_the_evaluators_of_each_pack_module(pack: str) -> None:
    entry = PACK_INDEX[pack]
    module = importlib.import_module(entry.module)
    real: tuple[Evaluator, ...] = module.EVALUATORS
    assert tuple(ev.manifest.name for ev in real) == tuple(f"builtin/{n}" for n in entry.evaluators)
    assert {ev.manifest.pack for ev in real} == {pack}


def test_every_pack_folder_is_in_the_index() -> None:
    on_disk = {m.name for m in pkgutil.iter_modules(evalsi.packs.__path__) if m.ispkg}
    assert on_disk == {e.module.rsplit(".", 1)[1] for e in PACK_INDEX.values()}


def test_the_lazy_registry_holds_what_importing_every_pack_gives() -> None:
    eager = Registry(
        ev for e in PACK_INDEX.values() for ev in importlib.import_module(e.module).EVALUATORS
    )
    lazy = builtin_registry(entry_points=False)
    assert len(lazy) == len(eager) == sum(len(e.evaluators) for e in PACK_INDEX.values())
    assert [ev.ref for ev in lazy] == [ev.ref for ev in eager]


IMPORTED = """
import sys
from evalsi.packs import builtin_registry
registry = builtin_registry()
{action}
loaded = {{m.split('.')[2] for m in sys.modules if m.startswith('evalsi.packs.')}}
packs = sorted(loaded - {{'_declare'}})  # the packs' shared module is not a pack
print(*packs, 'sandbox' if 'evalsi.sandbox' in sys.modules else '-')
"""


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("registry.resolve('exact-match')", "core -"),
        ("registry.resolve('builtin/bleu@1.0.0')", "text -"),
        ("'f1' in registry, len(registry)", "ml_classic -"),
        (
            "list(registry)",
            "agent bench code core judge ml_classic ml_monitoring rag safety text sandbox",
        ),
    ],
)
def test_resolving_a_name_imports_its_pack_only(action: str, expected: str) -> None:
    code = IMPORTED.format(action=action)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_an_unknown_name_fails_with_suggestions_before_any_pack_is_imported() -> None:
    code = (
        "import sys\nfrom evalsi.packs import builtin_registry\n"
        "try:\n    builtin_registry().resolve('exact-mach')\n"
        "except Exception as e:\n    print(type(e).__name__, str(e).splitlines()[0], '|', e.hint)\n"
        "print(any(m.startswith('evalsi.packs.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "UnknownEvaluatorError unknown evaluator 'exact-mach' | did you mean exact-match, "
        "trajectory-match? (`evalsi catalog list` shows all)",
        "False",
    ]


@evaluator(name="acme/yes", version="1.0.0")
def _yes(record: object) -> bool:
    return True


@evaluator(name="acme/yes", version="2.0.0")
def _yes2(record: object) -> bool:
    return True


@evaluator(name="builtin/yes", version="1.0.0")
def _builtin_yes(record: object) -> bool:
    return True


def _counting(*evaluators: Evaluator) -> tuple[list[int], Callable[[], tuple[Evaluator, ...]]]:
    calls: list[int] = []

    def load() -> tuple[Evaluator, ...]:
        calls.append(1)
        return evaluators

    return calls, load


def test_a_deferred_group_loads_once_on_first_resolve() -> None:
    calls, load = _counting(_yes, _yes2)
    registry = Registry()
    registry.defer(["acme/yes"], load)
    assert calls == []
    assert len(registry) == 1
    assert "acme/yes" in registry
    assert registry.resolve("yes").ref == "acme/yes@2.0.0"  # newest of what it loaded
    assert registry.resolve("acme/yes@1.0.0") is _yes
    assert calls == [1]


def test_a_deferred_builtin_wins_an_ambiguous_name_as_a_registered_one_does() -> None:
    _, load = _counting(_builtin_yes)
    registry = Registry([_yes])
    registry.defer(["builtin/yes"], load)
    assert registry.resolve("yes") is _builtin_yes
    with pytest.raises(UnknownEvaluatorError, match=r"has no version 3\.0\.0"):
        registry.resolve("acme/yes@3.0.0")


def test_a_loader_that_defines_other_names_than_declared_is_refused() -> None:
    _, load = _counting(_yes)
    registry = Registry()
    registry.defer(["acme/yes", "acme/no"], load)
    with pytest.raises(UserError, match=r"missing \['acme/no'\], undeclared \[\]"):
        registry.resolve("acme/yes")


def test_a_loader_that_fails_stays_deferred_and_fails_again() -> None:
    def broken() -> tuple[Evaluator, ...]:
        raise ImportError("no module named nowhere")

    registry = Registry()
    registry.defer(["acme/yes"], broken)
    for _ in range(2):
        with pytest.raises(ImportError, match="nowhere"):
            registry.resolve("acme/yes")


def test_registering_over_a_deferred_name_compares_with_the_deferred_code() -> None:
    @evaluator(name="acme/yes", version="1.0.0")
    def other(record: object) -> bool:
        return False

    calls, load = _counting(_yes)
    registry = Registry()
    registry.defer(["acme/yes"], load)
    with pytest.raises(UserError, match="registered twice with different code"):
        registry.register(other)
    assert calls == [1]
    registry.register(_yes2)  # another version of the same name: both kept
    assert [ev.ref for ev in registry] == ["acme/yes@2.0.0"]
    assert registry.resolve("acme/yes@1.0.0") is _yes


def test_a_malformed_deferred_name_fails_when_declared() -> None:
    with pytest.raises(UserError):
        Registry().defer(["Not A Name!"], lambda: ())

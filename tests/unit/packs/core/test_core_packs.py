"""The built-in registry and the contract every core evaluator keeps."""

from __future__ import annotations

import inspect
import shlex
from typing import Any

import pytest

from evalsi.core import OutputSpec, ParamError, UnknownEvaluatorError
from evalsi.evaluators import Evaluator, Registry
from evalsi.packs import BUILTIN_PACKS, builtin_registry, core

NAMES = [
    "exact-match",
    "fuzzy-match",
    "contains",
    "starts-with",
    "one-of",
    "regex",
    "json-valid",
    "json-schema",
    "length",
    "latency",
    "tokens",
    "cost",
]
CORE: list[Evaluator] = list(core.EVALUATORS)
# Minimal params for the evaluators that have required ones.
REQUIRED: dict[str, dict[str, Any]] = {
    "regex": {"pattern": "x"},
    "one-of": {"choices": ["a"]},
    "json-schema": {"schema": {"type": "object"}},
}


def ids(ev: Evaluator) -> str:
    return ev.name


def test_the_core_pack_holds_exactly_these_evaluators() -> None:
    assert [ev.name for ev in CORE] == NAMES
    assert BUILTIN_PACKS["core"].evaluators == core.EVALUATORS


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("spelling", ["builtin/{}@1.0.0", "builtin/{}", "{}"])
def test_builtin_registry_resolves_every_spelling(name: str, spelling: str) -> None:
    reg = builtin_registry(entry_points=False)
    ev = reg.resolve(spelling.format(name))
    assert ev.ref == f"builtin/{name}@1.0.0"


def test_builtin_registry_is_a_new_object_each_time() -> None:
    first = builtin_registry(entry_points=False)
    assert isinstance(first, Registry)
    assert first is not builtin_registry(entry_points=False)
    assert len(first) == sum(len(pack.evaluators) for pack in BUILTIN_PACKS.values())


def test_builtin_registry_loads_entry_points_on_request() -> None:
    # Whatever plugins are installed, the built-ins are all there.
    reg = builtin_registry()
    assert all(f"builtin/{name}" in reg for name in NAMES)


def test_unknown_names_suggest_close_ones() -> None:
    with pytest.raises(UnknownEvaluatorError) as info:
        builtin_registry(entry_points=False).resolve("exact-mach")
    assert info.value.hint is not None
    assert "exact-match" in info.value.hint


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_manifest_contract(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.ref.namespace == "builtin"
    assert m.version == "1.0.0"
    assert m.pack == "core"
    assert m.description
    assert "\n" not in m.description
    assert m.description.endswith(".")
    assert m.example.startswith("evalsi eval ")
    assert m.outputs
    assert m.outputs[0].name == ev.name, "the main metric carries the evaluator's name"
    names = [o.name for o in m.outputs]
    assert len(set(names)) == len(names)
    for out in m.outputs:
        assert isinstance(out, OutputSpec)
        assert out.type in ("number", "passed", "label", "structured")
        assert out.description
        if out.type == "passed":
            assert out.range == (0.0, 1.0)
            assert out.higher_is_better is True
        if out.range is not None:
            assert out.range[0] < out.range[1]


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_docstring_documents_every_param(ev: Evaluator) -> None:
    doc = inspect.getdoc(ev.target) or ""
    for spec in ev.params:
        assert f"    {spec.name}: " in doc, f"{ev.name}: param {spec.name} is not documented"


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_example_is_a_valid_command(ev: Evaluator) -> None:
    argv = shlex.split(ev.manifest.example)
    assert argv[:2] == ["evalsi", "eval"]
    assert argv[argv.index("--evaluators") + 1] == ev.name
    params: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg == "--param":
            key, _, value = argv[i + 1].partition("=")
            target, _, param = key.partition(".")
            assert target == ev.name
            params[param] = value
    ev.bind(params)  # the CLI passes strings; they must coerce and validate


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_unknown_params_are_rejected_with_the_evaluator_name(ev: Evaluator) -> None:
    params = {**REQUIRED.get(ev.name, {}), "colour": True}
    with pytest.raises(ParamError, match=f"^{ev.name}: unknown param 'colour'"):
        ev.bind(params)


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_wrong_param_types_are_rejected_with_the_evaluator_name(ev: Evaluator) -> None:
    for spec in ev.params:
        wrong: Any = {"boolean": "maybe", "string": 3, "array": 3}.get(spec.type, "x")
        params = {**REQUIRED.get(ev.name, {}), spec.name: wrong}
        with pytest.raises(ParamError, match=f"^{ev.name}: param '{spec.name}'"):
            ev.bind(params)


@pytest.mark.parametrize("ev", CORE, ids=ids)
def test_binds_with_defaults(ev: Evaluator) -> None:
    bound = ev.bind(REQUIRED.get(ev.name, {}))
    assert bound.spec()["ref"] == f"builtin/{ev.name}@1.0.0"
    assert callable(bound.record_fn())

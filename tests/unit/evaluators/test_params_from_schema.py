"""A plugin's params come back from its manifest's JSON schema: the same checks and coercions
as the evaluator's own signature gives in process."""

from __future__ import annotations

from typing import Literal

import pytest

from evalsi.core import ParamError
from evalsi.evaluators import evaluator, params_from_schema, validate_params


@evaluator(name="t/p", version="1.0.0")
def declared(
    record: object,
    *,
    ratio: float = 0.5,
    count: int = 3,
    mode: Literal["a", "b"] = "a",
    tags: tuple[str, ...] = (),
    flag: bool = False,
    name: str | None = None,
    needed: str,
) -> bool:
    return True


def test_the_schema_gives_back_the_declared_params() -> None:
    assert params_from_schema(declared.manifest.params_schema) == declared.params


def test_numbers_through_a_struct_stay_integers_where_declared() -> None:
    schema = {"properties": {"count": {"type": "integer", "default": 3.0}}}
    (spec,) = params_from_schema(schema)
    assert spec.default == 3
    assert isinstance(spec.default, int)


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ({"ratio": "0.25", "needed": "x"}, {"ratio": 0.25, "needed": "x"}),
        ({"flag": "yes", "needed": "x"}, {"flag": True, "needed": "x"}),
        ({"tags": "a,b", "needed": "x"}, {"tags": ["a", "b"], "needed": "x"}),
    ],
)
def test_cli_strings_are_coerced_as_in_process(given: dict, want: dict) -> None:
    specs = params_from_schema(declared.manifest.params_schema)
    assert (
        validate_params("p", specs, given) == want == validate_params("p", declared.params, given)
    )


@pytest.mark.parametrize(
    "given", [{"needed": "x", "mode": "c"}, {"needed": "x", "nope": 1}, {"ratio": 1.0}]
)
def test_bad_params_are_refused_as_in_process(given: dict) -> None:
    specs = params_from_schema(declared.manifest.params_schema)
    with pytest.raises(ParamError) as plugin:
        validate_params("p", specs, given)
    with pytest.raises(ParamError) as here:
        validate_params("p", declared.params, given)
    assert str(plugin.value) == str(here.value)


def test_an_unreadable_property_is_any() -> None:
    (spec,) = params_from_schema({"properties": {"x": {"type": ["string", "integer"]}}})
    assert spec.type == "any"
    assert not spec.required

"""CatalogHandler without a network: a bad ref is bad input (400) and names ``ref``, an unknown
one is not found (404), and the listings are the server's registry and run engine tables."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as pb
from evalsi.core import NotFoundError, UserError
from evalsi.packs import BUILTIN_PACKS
from evalsi.server._catalog import CatalogHandler
from tests.support.server_state import server_state


def _handler(tmp_path: Path, **config: object) -> CatalogHandler:
    return CatalogHandler(server_state(tmp_path, store=":memory:", runs=False, **config))


@pytest.mark.parametrize("ref", ["", "   "])
def test_an_empty_ref_is_bad_input_naming_the_field(tmp_path: Path, ref: str) -> None:
    with pytest.raises(UserError) as caught:
        asyncio.run(_handler(tmp_path).get_evaluator(pb.GetEvaluatorRequest(ref=ref), None))
    assert not isinstance(caught.value, NotFoundError)
    assert caught.value.message.startswith("ref: empty")


def test_a_malformed_ref_is_bad_input_not_a_missing_evaluator(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        asyncio.run(
            _handler(tmp_path).get_evaluator(pb.GetEvaluatorRequest(ref="Exact Match!"), None)
        )
    assert not isinstance(caught.value, NotFoundError)
    assert "invalid evaluator reference" in caught.value.message
    assert caught.value.hint  # says how a reference is written


def test_an_unknown_ref_is_not_found_and_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as caught:
        asyncio.run(_handler(tmp_path).get_evaluator(pb.GetEvaluatorRequest(ref="no-such"), None))
    assert caught.value.message.startswith("ref: ")


def test_a_known_ref_answers_its_manifest(tmp_path: Path) -> None:
    answer = asyncio.run(
        _handler(tmp_path).get_evaluator(pb.GetEvaluatorRequest(ref="exact-match"), None)
    )
    assert answer.evaluator.ref.name == "exact-match"


def test_evaluators_filtered_by_pack(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    every = asyncio.run(handler.list_evaluators(pb.ListEvaluatorsRequest(), None)).evaluators
    core = asyncio.run(handler.list_evaluators(pb.ListEvaluatorsRequest(pack="core"), None))
    none = asyncio.run(handler.list_evaluators(pb.ListEvaluatorsRequest(pack="no-such"), None))
    names = {e.ref.name for e in core.evaluators}
    assert "exact-match" in names
    assert 0 < len(names) < len(every)
    assert list(none.evaluators) == []


def test_packs_list_every_builtin_and_which_may_run_implicitly(tmp_path: Path) -> None:
    answer = asyncio.run(
        _handler(tmp_path, packs=("core", "text")).list_packs(pb.ListPacksRequest(), None)
    )
    packs = {p.name: p for p in answer.packs}
    assert set(BUILTIN_PACKS) <= set(packs)
    assert "exact-match" in packs["core"].evaluators
    enabled = {name for name, p in packs.items() if p.enabled}
    assert enabled == {"core", "text"}


@pytest.mark.parametrize("allowed", [False, True])
def test_connectors_say_when_python_targets_are_off(tmp_path: Path, allowed: bool) -> None:
    answer = asyncio.run(
        _handler(tmp_path, allow_python_targets=allowed).list_connectors(
            pb.ListConnectorsRequest(), None
        )
    )
    by_name = {c.name: c for c in answer.connectors}
    assert {"openai-compatible", "anthropic", "python", "http"} <= set(by_name)
    assert ("disabled on this server" in by_name["python"].description) is not allowed
    assert by_name["http"].roles == "target"  # comma-separated: "target", "judge" or both

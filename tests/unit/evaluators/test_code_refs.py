"""Evaluators loaded by reference (`FILE.py:NAME`, `MODULE:NAME`) in the registry: resolved by
the text typed only, never by name (a file cannot shadow an installed evaluator), and an
unloaded code ref is a clear error (what a server answers to a spec that names one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import UnknownEvaluatorError, UserError
from evalsi.evaluators import Registry, evaluator, is_code_ref, load_code_evaluator
from evalsi.packs import builtin_registry


def test_code_ref_resolves_by_its_text_only(tmp_path: Path) -> None:
    (tmp_path / "e.py").write_text(
        "from evalsi import evaluator\n"
        "@evaluator(name='exact-match')\n"
        "def mine(record):\n    return True\n",
        encoding="utf-8",
    )
    registry = builtin_registry()
    ev = load_code_evaluator("e.py:mine", base=tmp_path)
    registry.register(ev, code_ref="e.py:mine")
    assert registry.resolve("e.py:mine") is ev
    assert registry.resolve("exact-match").ref == "builtin/exact-match@1.0.0"  # not shadowed
    assert ev.source is not None
    assert ev.source["file"] == str((tmp_path / "e.py").resolve())
    assert ev.source["sha256"].startswith("sha256:")
    bound = ev.bind()
    assert bound.spec()["source"] == ev.source
    assert bound.manifest_entry()["source"] == ev.source


def test_unloaded_code_ref_is_named_with_a_hint() -> None:
    with pytest.raises(UnknownEvaluatorError, match="is code from a file or module") as info:
        Registry().resolve("evals.py:x")
    assert "server only knows the evaluators installed" in str(info.value)


def test_shared_objects_are_not_changed(tmp_path: Path) -> None:
    # A built-in reached through its module is copied: the registry's own object keeps no source.
    loaded = load_code_evaluator("evalsi.packs.core._match:exact_match")
    assert loaded.source is not None
    assert loaded.source["module"] == "evalsi.packs.core._match"
    assert builtin_registry().resolve("exact-match").source is None


def test_is_code_ref() -> None:
    assert is_code_ref("x.py:f")
    assert is_code_ref("pkg.mod:f")
    assert not is_code_ref("builtin/exact-match@1.0.0")
    assert not is_code_ref("exact-match")


def test_a_plain_callable_that_cannot_be_an_evaluator(tmp_path: Path) -> None:
    (tmp_path / "e.py").write_text("def f(record, needed):\n    return 1\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"cannot be used as an evaluator.*'needed'"):
        load_code_evaluator("e.py:f", base=tmp_path)
    assert evaluator  # the decorator the message points at

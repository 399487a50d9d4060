"""Every docstring example in the package runs and prints what it says: an example is a test."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import evalsi

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(evalsi.__path__, "evalsi.")
    if "._proto" not in info.name and not info.name.endswith("_writer_process")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(
    name: str, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # examples that store results write under a temp cwd
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"

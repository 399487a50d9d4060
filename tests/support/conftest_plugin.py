"""Fixtures for tests that talk to the stub LLM server over real HTTP.

Enable them for the whole suite with ``pytest_plugins = ["tests.support.conftest_plugin"]`` in
``tests/conftest.py``, or import the fixture into a package's ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.stub_llm import StubLLM


@pytest.fixture
def stub_llm() -> Iterator[StubLLM]:
    """A fresh stub server on a free loopback port (echo answers, no latency, no faults)."""
    with StubLLM() as stub:
        yield stub

"""The slow lane: the built-in agent and the user simulator against a real small model on
loopback (``tests/support/small_model.py``). Its tests carry the ``small_model`` marker, which
the default run deselects; ``make test-slow`` runs them. Without the model or the server's
build every test is skipped with the reason; a server that is installed but fails to start
fails them. What the runs measured is printed at the end of pytest's report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.small_model import ServerFailed, SmallModel, model_file, serve, unavailable

MEASURED: list[str] = []


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmallModel]:
    """One server for the session (the model loads once)."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    path = model_file()
    assert path is not None
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    threads = int(os.environ.get("SMALL_MODEL_THREADS", "1"))
    try:
        with serve(path, log, threads=threads) as model:
            MEASURED.append(
                f"{path.name}: server up and model loaded in {model.load_seconds:.1f} s"
            )
            yield model
    except ServerFailed as e:
        pytest.fail(str(e))


@pytest.fixture
def measured() -> list[str]:
    """Lines for the report's "small model" section."""
    return MEASURED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if MEASURED:
        terminalreporter.section("small model")
        for line in MEASURED:
            terminalreporter.write_line(line)

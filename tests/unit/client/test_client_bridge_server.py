"""``evalsi.Client`` runs ``AsyncClient`` on a private loop: against the real server app on
loopback, it must work inside a running loop, read streamed input as it is sent, let callbacks
use the client, stop waiting on Ctrl-C, and end its thread on close or when collected."""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import RunError
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import StubLLM

ROWS = [{"id": f"r{i}", "output": "Paris", "reference": "Paris"} for i in range(40)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(server_state(tmp_path_factory.mktemp("bridge"))) as s:
        yield s.url


def _client_threads(url: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"evalsi-client {url}")]


def test_a_client_works_inside_a_running_loop(server: str) -> None:
    async def notebook_cell() -> tuple[Any, list[Any]]:
        with evalsi.Client(server) as client:
            scored = client.evaluate(ROWS, ["exact-match"])
            updates = list(client.evaluate_stream(iter(ROWS), ["exact-match"], batch_size=9))
            return scored, updates

    scored, updates = asyncio.run(notebook_cell())
    assert scored.metric("exact-match").mean == 1.0
    assert len(scored.results) == 40
    assert sum(len(u.results) for u in updates) == 40


@pytest.mark.parametrize("protocol", ["connect", "grpc"])
def test_streamed_input_is_read_as_it_is_sent(server: str, protocol: Any) -> None:
    log: list[str] = []

    def slow_rows() -> Iterator[dict[str, Any]]:
        for i, row in enumerate(ROWS):
            if i and i % 5 == 0:
                time.sleep(0.1)  # a producer that takes its time
            log.append("pulled")
            yield row

    # The server answers each batch while later ones are still being produced.
    with evalsi.Client(server, protocol=protocol) as client:
        for update in client.evaluate_stream(slow_rows(), ["exact-match"], batch_size=5):
            log.append(f"got {len(update.results)}")
    assert log.count("pulled") == 40
    first_answer = next(i for i, e in enumerate(log) if e.startswith("got"))
    assert first_answer < len(log) - 1 - log[::-1].index("pulled"), log


def test_a_progress_callback_may_use_the_client(server: str) -> None:
    seen: list[int] = []
    with evalsi.Client(server) as client:

        def progress(done: int, bad: int) -> None:
            # Runs on the client's loop thread; a call from there must not deadlock.
            seen.append(len(client.list_packs()))

        client.evaluate(ROWS, ["exact-match"], progress=progress)
    assert len(seen) == 1
    assert seen[0] > 0


def test_ctrl_c_stops_the_wait_and_the_client_stays_usable(server: str, tmp_path: Path) -> None:
    (tmp_path / "qa.jsonl").write_text(
        "".join(f'{{"id": "s{i}", "input": "q{i}", "reference": "q{i}"}}\n' for i in range(40))
    )
    main = threading.get_ident()
    with StubLLM(latency_ms=400) as slow, evalsi.Client(server) as client:
        spec = {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "bridge-ctrl-c"},
            "spec": {
                "target": {
                    "model": {
                        "connector": "openai-compatible",
                        "baseUrl": slow.openai_url,
                        "model": "stub-echo",
                    }
                },
                "dataset": {"path": str(tmp_path / "qa.jsonl")},
                "maxConcurrency": 1,
                "evaluators": [{"ref": "exact-match"}],
            },
        }
        started = client.create_run(spec, wait=False)
        timer = threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        begun = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.wait_run(started.run_id)
        assert time.monotonic() - begun < 10
        # The abandoned watch is cancelled; the next calls go through as usual.
        assert client.cancel_run(started.run_id).run_id == started.run_id
        assert client.get_run(started.run_id).run_id == started.run_id


def test_close_and_collection_end_the_thread(server: str) -> None:
    client = evalsi.Client(server)
    assert _client_threads(client.url) == []  # started on first use
    client.list_packs()
    assert len(_client_threads(client.url)) == 1
    client.close()
    assert _client_threads(client.url) == []
    with pytest.raises(RunError, match="closed"):  # as with the sync transport before
        client.list_packs()
    client.close()  # twice is fine

    unclosed = evalsi.Client(server)
    unclosed.list_packs()
    del unclosed
    gc.collect()
    deadline = time.monotonic() + 5
    while _client_threads(server) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _client_threads(server) == []

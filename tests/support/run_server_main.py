"""A RunService server for tests: ``ServerState`` + ``RunManager`` + ``RunHandler`` under
``build_app``, served by hypercorn.

In the test process: ``run_state(...)`` and ``run_app(state)`` (serve it with ``AsgiServer``).
As a process (restart tests kill it with SIGKILL)::

    python -m tests.support.run_server_main STORE DATASETS_DIR PORT [MAX_CONCURRENT_RUNS]

prints ``LISTENING`` once it accepts connections and serves until killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceASGIApplication
from evalsi.server._app import build_app
from evalsi.server._runs import RunHandler
from evalsi.server._state import ServerState
from tests.support.server_state import server_state


def run_state(store: str, datasets_dir: Path, **config: Any) -> ServerState:
    """A server state over ``store`` (a SQLite path or a PostgreSQL URL) with a RunManager."""
    return server_state(datasets_dir.parent, store=store, datasets_dir=datasets_dir, **config)


def run_app(state: ServerState) -> Any:
    """The server's app with only the RunService (its lifespan starts and stops the runs)."""
    return build_app(state, services=[(RunServiceASGIApplication, RunHandler(state))])


async def _serve(state: ServerState, port: int) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.keep_alive_max_requests = 1_000_000_000
    config.accesslog = None
    app = run_app(state)
    task = asyncio.create_task(serve(app, config))
    for _ in range(500):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        break
    print("LISTENING", flush=True)
    await task


def main(argv: list[str]) -> None:
    store, datasets, port = argv[0], Path(argv[1]), int(argv[2])
    extra = {"max_concurrent_runs": int(argv[3])} if len(argv) > 3 else {}
    asyncio.run(_serve(run_state(store, datasets, **extra), port))


def run_doc(
    base_url: str,
    dataset: str,
    *,
    name: str = "srv",
    trials: int = 1,
    concurrency: int = 4,
    gates: tuple[str, ...] = (),
) -> dict[str, Any]:
    """An ``EvalRun`` document (the YAML as data) calling the stub LLM at ``base_url``."""
    spec: dict[str, Any] = {
        "target": {
            "model": {
                "connector": "openai-compatible",
                "baseUrl": base_url,
                "model": "stub-model",
                "params": {"max_tokens": 16},
            }
        },
        "dataset": {"path": dataset},
        "evaluators": [{"ref": "exact-match"}],
        "trials": trials,
        "maxConcurrency": concurrency,
        "seed": 7,
    }
    if gates:
        spec["gates"] = list(gates)
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name},
        "spec": spec,
    }


def run_message(doc: dict[str, Any]) -> Any:
    """The ``EvalRun`` message of a document, as a client sends it."""
    from google.protobuf import json_format

    from evalsi._proto.evalsi.v1alpha1 import run_pb2

    return json_format.ParseDict(doc, run_pb2.EvalRun())


if __name__ == "__main__":
    main(sys.argv[1:])

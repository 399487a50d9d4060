"""Evaluator plugins against real plugin processes: the acme test plugin
(tests/fixtures/plugins/acme-plugin) served by ``python -m evalsi.plugins`` in a subprocess on a
unix socket, killed, hung and answering malformed batches. Its package is installed into a
folder on the plugin's path (fast); test_int_plugin_venv.py installs it into a real venv."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

import evalsi
from evalsi._proto.evalsi.plugin.v1alpha1 import plugin_pb2 as pb
from evalsi.core import Outcome, UserError
from evalsi.evaluators import Registry
from evalsi.plugins import InstalledPlugin, PluginHost, plugin_evaluators
from tests.support.plugins import SRC, install_to_folder, started_plugin

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "plugins" / "acme-plugin"
RECORDS = [
    {"id": "a", "input": "q", "output": "HELLO there"},
    {"id": "b", "input": "q", "output": ""},
    {"id": "c", "input": "q", "output": "boom"},
    {"id": "d", "input": "q", "output": "QUIET"},
]


@pytest.fixture(scope="module")
def acme_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_to_folder(
        FIXTURE, tmp_path_factory.mktemp("acme"), tmp_path_factory.mktemp("acme-src")
    )


def _acme(acme_path: Path, **options: Any) -> tuple[PluginHost, Registry]:
    return started_plugin(FIXTURE, "acme", acme_path, **options)


@pytest.fixture
def acme(acme_path: Path) -> Iterator[tuple[PluginHost, Registry]]:
    host, registry = _acme(acme_path, batch_timeout_s=3.0, max_restarts=2)
    yield host, registry
    host.close()


def _outcomes(result: Any, evaluator: str) -> list[tuple[str, Outcome, str]]:
    return [(r.record_id, r.outcome, r.reason) for r in result.results if r.evaluator == evaluator]


def test_plugin_scores_equal_the_same_evaluators_in_process(
    acme: tuple[PluginHost, Registry], acme_path: Path
) -> None:
    _, registry = acme
    sys.path.insert(0, str(acme_path))
    try:
        import acme_plugin
    finally:
        sys.path.remove(str(acme_path))
    names = ["acme/shouty", "acme/length", "acme/picky"]
    params = {"acme/shouty": {"min_ratio": 0.4}}
    out = evalsi.evaluate(
        RECORDS, evaluators=names, params=params, registry=registry, store=":memory:"
    )
    here = evalsi.evaluate(
        RECORDS,
        evaluators=[acme_plugin.shouty, acme_plugin.length, acme_plugin.picky],
        params={"shouty": {"min_ratio": 0.4}},
        store=":memory:",
    )
    got = sorted(
        (r.evaluator, r.record_id, r.outcome, r.reason, repr(r.scores)) for r in out.results
    )
    want = sorted(
        (r.evaluator, r.record_id, r.outcome, r.reason, repr(r.scores)) for r in here.results
    )
    assert got == want
    assert _outcomes(out, "picky") == [
        ("a", Outcome.SCORED, ""),
        ("b", Outcome.SKIPPED, "empty output"),
        ("c", Outcome.ERROR, "ValueError: boom"),
        ("d", Outcome.SCORED, ""),
    ]
    # the run's spec records where the evaluator came from
    entry = next(e for e in out.evaluators if e["ref"] == "acme/shouty@1.0.0")
    assert entry["source"] == {"plugin": "acme", "plugin_version": "1.2.0"}


def test_params_are_checked_against_the_plugins_schema(acme: tuple[PluginHost, Registry]) -> None:
    _, registry = acme
    shouty = registry.resolve("acme/shouty")
    assert shouty.manifest.params_schema["properties"]["min_ratio"]["type"] == "number"
    with pytest.raises(UserError, match="min_ratio"):
        shouty.bind({"min_ratio": "loud"})
    with pytest.raises(UserError, match="shouty"):
        shouty.bind({"no_such": 1})
    assert shouty.bind({"min_ratio": "0.25"}).params == {"min_ratio": 0.25}  # as --param gives it


def test_a_plugin_killed_mid_batch_errors_that_batch_as_infra_then_restarts(
    acme: tuple[PluginHost, Registry],
) -> None:
    host, registry = acme
    process = host._process
    assert process is not None
    timer = threading.Timer(0.5, os.kill, (process.pid, signal.SIGKILL))
    timer.start()
    out = evalsi.evaluate(
        RECORDS[:2],
        evaluators=["acme/slow"],
        params={"acme/slow": {"seconds": 2.0}},
        registry=registry,
        store=":memory:",
    )
    timer.join()
    assert out.status == "done"  # the run finished; the batch is lost to infrastructure
    for _, outcome, reason in _outcomes(out, "slow"):
        assert outcome is Outcome.ERROR
        assert reason.startswith("infra_error(plugin): plugin: acme: ")
    assert out.metric("slow").infra_errors == 2
    # the next batch starts the plugin again
    again = evalsi.evaluate(
        RECORDS[:1], evaluators=["acme/slow"], registry=registry, store=":memory:"
    )
    assert [o for _, o, _ in _outcomes(again, "slow")] == [Outcome.SCORED]
    assert host._process is not None
    assert host._process.pid != process.pid
    assert host.restarts == 0  # the answered batch made the restart budget whole again


def test_a_plugin_that_dies_on_a_record_loses_its_batch_not_the_run(
    acme: tuple[PluginHost, Registry],
) -> None:
    _, registry = acme
    rows = [{"id": "x", "output": "fine"}, {"id": "y", "output": "die"}]
    out = evalsi.evaluate(
        rows, evaluators=["acme/picky", "acme/length"], registry=registry, store=":memory:"
    )
    assert [o for _, o, _ in _outcomes(out, "picky")] == [Outcome.ERROR, Outcome.ERROR]
    assert all(r.startswith("infra_error(plugin)") for _, _, r in _outcomes(out, "picky"))
    # the other evaluator's batch (after the restart) scored
    assert [o for _, o, _ in _outcomes(out, "length")] == [Outcome.SCORED, Outcome.SCORED]


def test_a_hung_batch_times_out_as_infra_and_the_plugin_is_killed(acme_path: Path) -> None:
    host, registry = _acme(acme_path, batch_timeout_s=1.0, max_restarts=1)
    try:
        first = host._process
        started = time.monotonic()
        out = evalsi.evaluate(
            RECORDS[:1],
            evaluators=["acme/slow"],
            params={"acme/slow": {"seconds": 60}},
            registry=registry,
            store=":memory:",
        )
        assert time.monotonic() - started < 20
        ((_, outcome, reason),) = _outcomes(out, "slow")
        assert outcome is Outcome.ERROR
        assert reason == "infra_error(plugin): plugin: acme: batch timed out after 1s"
        assert first is not None
        assert first.poll() is not None
        # one restart in a row allowed: an answered batch makes the budget whole again
        ok = evalsi.evaluate(
            RECORDS[:1], evaluators=["acme/slow"], registry=registry, store=":memory:"
        )
        assert [o for _, o, _ in _outcomes(ok, "slow")] == [Outcome.SCORED]
        assert host.restarts == 0
        hang = {"acme/slow": {"seconds": 60}}
        for _ in range(2):  # hangs, then hangs again after its one restart
            evalsi.evaluate(
                RECORDS[:1], evaluators=["acme/slow"], params=hang, registry=registry,
                store=":memory:",
            )  # fmt: skip
        done = evalsi.evaluate(
            RECORDS[:1], evaluators=["acme/slow"], registry=registry, store=":memory:"
        )
        ((_, outcome, reason),) = _outcomes(done, "slow")
        assert outcome is Outcome.ERROR
        assert reason == "infra_error(plugin): plugin: acme: gave up after 1 restarts"
    finally:
        host.close()


def test_a_plugin_that_does_not_start_is_a_user_error_naming_it(
    acme_path: Path, tmp_path: Path
) -> None:
    missing = InstalledPlugin(
        name="ghost", version="", source="ghost-pkg", python=str(tmp_path / "nope"), entry_point="x"
    )
    with pytest.raises(UserError, match=r"plugin 'ghost' did not start: cannot run .*nope"):
        PluginHost(missing).start()
    broken = InstalledPlugin(
        name="acme", version="", source="acme", python=sys.executable, entry_point="not-there"
    )
    host = PluginHost(broken, env={"PYTHONPATH": f"{SRC}{os.pathsep}{acme_path}"})
    with pytest.raises(UserError, match=r"plugin 'acme' did not start: its process exited \(2\)"):
        host.start()
    host.close()


# -- a plugin that answers wrongly: a gRPC service written by hand ------------------------------
class _Liar:
    """Answers each batch as ``mode`` says: too few results, an unknown outcome, an infra_error,
    or it closes the stream."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def evaluate(self, requests: Any, context: Any) -> Any:
        async for request in requests:
            out = pb.EvaluateResponse(batch_id=request.batch_id)
            if self.mode == "close":
                return
            if self.mode == "infra":
                out.infra_error = "model failed to load"
            for _ in request.records[: -1 if self.mode == "short" else None]:
                if self.mode != "infra":
                    out.results.add(outcome=7 if self.mode == "outcome" else 1)
            yield out


async def _serve_liar(mode: str, address: str) -> Any:
    from evalsi.plugins._protocol import SERVICE  # the service name both sides use

    async def describe(_: Any, __: Any) -> Any:
        return pb.DescribeResponse(name="liar", version="0")

    liar = _Liar(mode)
    handlers = {
        "Describe": grpc.unary_unary_rpc_method_handler(
            describe,
            request_deserializer=pb.DescribeRequest.FromString,
            response_serializer=pb.DescribeResponse.SerializeToString,
        ),
        "Evaluate": grpc.stream_stream_rpc_method_handler(
            liar.evaluate,
            request_deserializer=pb.EvaluateRequest.FromString,
            response_serializer=pb.EvaluateResponse.SerializeToString,
        ),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    server.add_insecure_port(address)
    await server.start()
    return server


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("short", "infra_error(plugin): plugin: liar: malformed answer: 1 results for 2 records"),
        ("outcome", "infra_error(plugin): plugin: liar: malformed answer: "),
        (
            "infra",
            "infra_error(plugin): plugin: liar: the plugin could not run the batch: "
            "model failed to load",
        ),
        ("close", "infra_error(plugin): plugin: liar: the plugin closed the stream"),
        # a record SCORED without a score is that record's error, not the batch's
        ("empty", "malformed answer: SCORED without scores"),
    ],
)
def test_malformed_answers_are_infra_errors(
    mode: str, reason: str, acme: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, acme_registry = acme
    address = f"unix:{tmp_path / 'liar.sock'}"
    manifest = acme_registry.resolve("acme/length").manifest

    async def scenario() -> list[Any]:
        server = await _serve_liar(mode, address)
        try:
            plugin = InstalledPlugin(
                name="liar",
                version="0",
                source=address,
                url=address,
                evaluators=(InstalledPlugin.manifest_doc(manifest),),
            )
            host = PluginHost(plugin, max_restarts=0)
            await asyncio.to_thread(host.start)
            registry = Registry(plugin_evaluators(plugin, host))
            out = await evalsi.evaluate_async(
                RECORDS[:2], evaluators=["acme/length"], registry=registry, store=":memory:"
            )
            host.close()
            return _outcomes(out, "length")
        finally:
            await server.stop(None)

    got = asyncio.run(scenario())
    assert [o for _, o, _ in got] == [Outcome.ERROR, Outcome.ERROR]
    for _, _, why in got:
        assert why.startswith(reason)


def test_a_plugin_served_at_an_address_installs_and_grades(
    acme_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.plugins import add_plugins, install_plugin, load_installed, serve_plugin

    sys.path.insert(0, str(acme_path))
    try:
        import acme_plugin
    finally:
        sys.path.remove(str(acme_path))
    address = f"unix:{tmp_path / 'acme.sock'}"
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        serve_plugin(acme_plugin.EVALUATORS, address, name="acme-remote", version="9.9"), loop
    ).result(10)
    try:
        (found,) = install_plugin(address, base=tmp_path)
        assert (found.name, found.version, found.url, found.venv) == (
            "acme-remote",
            "9.9",
            address,
            "",
        )
        assert load_installed(tmp_path) == [found]
        registry = add_plugins(Registry(), tmp_path)
        out = evalsi.evaluate(
            RECORDS[:2], evaluators=["acme/length"], registry=registry, store=":memory:"
        )
        assert [r.scores[0].number for r in out.results] == [11.0, 0.0]
        # evalsi.evaluate's default registry holds the installed plugins too
        monkeypatch.setenv("EVALSI_DATA_DIR", str(tmp_path))
        again = evalsi.evaluate(RECORDS[:2], evaluators=["acme/length"], store=":memory:")
        assert [r.scores[0].number for r in again.results] == [11.0, 0.0]
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

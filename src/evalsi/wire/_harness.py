"""The harness protocol over gRPC: a harness in another process, as an ``evalsi.agents.Harness``
(``connect_harness``), and a Python harness served to evalsi from a process of its own
(``serve_harness``).

A harness process listens on a unix socket or a loopback port; evalsi either connects to one
already running (``harness: {grpc: ADDRESS}``) or starts it (``harness: {command: {argv}}``,
the socket path in ``EVALSI_HARNESS_SOCKET``) and stops it after the run. Any language works:
the service is ``proto/evalsi/harness/v1alpha1/harness.proto``. A call that fails (the process
died, an error status, a malformed answer) loses that task to infrastructure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import grpc.aio  # type: ignore[import-untyped]

from evalsi._proto.evalsi.harness.v1alpha1 import harness_pb2 as pb
from evalsi.agents import (
    CheckResult,
    Final,
    Harness,
    HarnessInfo,
    TaskSetup,
    ToolSpec,
    resolve_program,
)
from evalsi.connectors import InfraError
from evalsi.core import Check, Step, UserError
from evalsi.specs import HarnessSpec
from evalsi.wire._json import _set_value, _set_value_map, _value_map_from_proto, value_from_proto
from evalsi.wire._records import (
    _set_step,
    _set_usage,
    _step_from_proto,
    _usage_from_proto,
    content_from_proto,
    content_to_proto,
)

SERVICE = "evalsi.harness.v1alpha1.HarnessService"
SOCKET_ENV = "EVALSI_HARNESS_SOCKET"
CALL_TIMEOUT_S = 300.0
"""Setup, Check, Teardown and Describe each; Run is bounded by the agent's own budgets."""
MAX_MESSAGE = 64 * 1024 * 1024
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "NODE_PATH")
_PERMISSIONS = ("read", "write", "irreversible")

_METHODS: dict[str, tuple[Any, Any]] = {
    "Describe": (pb.DescribeRequest, pb.DescribeResponse),
    "Setup": (pb.SetupRequest, pb.SetupResponse),
    "Run": (pb.RunRequest, pb.RunEvent),
    "Check": (pb.CheckRequest, pb.CheckResponse),
    "Teardown": (pb.TeardownRequest, pb.TeardownResponse),
}


# -- the client side: a harness in another process ----------------------------------------------
class RemoteHarness:
    """A harness process reached over ``channel``, as an ``evalsi.agents.Harness``."""

    def __init__(self, channel: grpc.aio.Channel, where: str) -> None:
        self.where = where
        self._calls = {
            name: (channel.unary_stream if name == "Run" else channel.unary_unary)(
                f"/{SERVICE}/{name}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )
            for name, (request, response) in _METHODS.items()
        }

    async def _call(self, name: str, request: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        try:
            return await self._calls[name](request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise _infra(self.where, name, e) from None

    async def describe(self, timeout: float = CALL_TIMEOUT_S) -> HarnessInfo:
        r = await self._call("Describe", pb.DescribeRequest(), timeout)
        tools = tuple(
            ToolSpec(
                t.name,
                t.description,
                permission=t.permission if t.permission in _PERMISSIONS else "irreversible",
                data_class=t.data_class or "public",
                reversible=t.reversible,
                exposure="external" if t.exposure == "external" else "internal",
            )
            for t in r.tools
        )
        return HarnessInfo(r.name, r.version, tools)

    async def setup(self, task: TaskSetup) -> str:
        request = pb.SetupRequest(
            run_id=task.run_id,
            task_id=task.task_id,
            trial=task.trial,
            input=content_to_proto(task.input),
            workspace=str(task.workspace or ""),
        )
        if task.seed is not None:
            request.seed = task.seed
        _set_value(request.fixtures, {"files": dict(task.fixtures)})
        _set_value_map(request.metadata, dict(task.metadata))
        response = await self._call("Setup", request)
        return str(response.session)

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        stream = self._calls["Run"](pb.RunRequest(session=session))
        finished = False
        try:
            async for event in stream:
                which = event.WhichOneof("event")
                if which == "step":
                    yield _step_from_proto(event.step)
                elif which == "final":
                    f = event.final
                    yield Final(
                        content_from_proto(f.output),
                        _usage_from_proto(f.usage),
                        f.stop_reason or "final_answer",
                    )
                else:
                    raise InfraError("harness", f"{self.where}: Run sent an empty event")
            finished = True
        except grpc.aio.AioRpcError as e:
            raise _infra(self.where, "Run", e) from None
        finally:
            if not finished:  # the caller stopped reading early (a Final, a budget)
                stream.cancel()

    async def check(self, session: str) -> CheckResult:
        r = await self._call("Check", pb.CheckRequest(session=session))
        checks = tuple(Check(c.name, c.passed, c.detail) for c in r.checks)
        end_state = value_from_proto(r.end_state) if r.HasField("end_state") else None
        return CheckResult(checks, end_state)

    async def teardown(self, session: str) -> None:
        await self._call("Teardown", pb.TeardownRequest(session=session))


def _infra(where: str, method: str, e: grpc.aio.AioRpcError) -> InfraError:
    return InfraError("harness", f"{where}: {method}: {e.code().name}: {e.details() or ''}")


_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
]


@contextlib.asynccontextmanager
async def connect_harness(spec: HarnessSpec, where: str) -> AsyncIterator[Harness]:
    """The harness ``spec`` names (``grpc`` or ``command``), connected, for the run: its
    ``Describe`` answered before the first task, a started process stopped afterwards."""
    async with contextlib.AsyncExitStack() as stack:
        if spec.grpc:
            address = spec.grpc
            timeout = 10.0
        else:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="evalsi-harness-"))
            socket = str(Path(directory) / "harness.sock")
            address = f"unix:{socket}"
            process = await _start(spec, socket, where)
            stack.push_async_callback(_stop, process)
            timeout = spec.start_timeout_s
        # Listening is checked with a plain connection, not the channel's readiness: a
        # channel_ready() cancelled on timeout can leave close() waiting forever.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await _listening(address):
            if not spec.grpc and process.returncode is not None:
                tail = await _stderr_tail(process)
                raise UserError(
                    f"{where}: the harness process exited ({process.returncode}) before serving"
                    + (f": {tail}" if tail else "")
                )
            if loop.time() >= deadline:
                raise UserError(f"{where}: no harness answered at {address} within {timeout:g}s")
            await asyncio.sleep(0.05)
        channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
        stack.push_async_callback(_close, channel)
        harness = RemoteHarness(channel, where)
        try:
            await harness.describe(timeout=max(deadline - loop.time(), 5.0))
        except InfraError as e:
            raise UserError(f"{where}: Describe failed ({e.message})") from None
        yield harness


async def _listening(address: str) -> bool:
    """Whether something accepts connections at a ``unix:PATH`` or ``HOST:PORT`` address."""
    try:
        if address.startswith("unix:"):
            _, writer = await asyncio.open_unix_connection(address.removeprefix("unix:"))
        else:
            host, _, port = address.rpartition(":")
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    except (OSError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _close(channel: grpc.aio.Channel) -> None:
    with contextlib.suppress(TimeoutError):  # never let a stuck channel hold the run open
        await asyncio.wait_for(channel.close(), 5.0)


async def _start(spec: HarnessSpec, socket: str, where: str) -> asyncio.subprocess.Process:
    env = {k: v for k in _PASSED_ENV if (v := os.environ.get(k)) is not None}
    env.update(spec.env)
    env[SOCKET_ENV] = socket
    argv = [resolve_program(spec.argv[0]), *spec.argv[1:]]
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            cwd=spec.cwd or None,
        )
    except OSError as e:
        raise UserError(f"{where}.argv: cannot start {spec.argv[0]!r}: {e.strerror}") from None


async def _stderr_tail(process: asyncio.subprocess.Process) -> str:
    if process.stderr is None:
        return ""
    with contextlib.suppress(Exception):
        data = await asyncio.wait_for(process.stderr.read(), 2.0)
        return data[-500:].decode(errors="replace").strip()
    return ""


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), 5.0)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


# -- the server side: a Python harness in its own process ---------------------------------------
async def serve_harness(harness: Harness, address: str | None = None) -> grpc.aio.Server:
    """Serve ``harness`` on ``address`` (default ``unix:$EVALSI_HARNESS_SOCKET``); started, not
    awaited: ``await server.wait_for_termination()`` keeps it up.

    Example (the harness process a spec's ``harness: {command: {argv: [python, my_harness.py]}}``
    starts)::

        async def main() -> None:
            server = await evalsi.wire.serve_harness(MyHarness())
            await server.wait_for_termination()

        asyncio.run(main())
    """
    if address is None:
        socket = os.environ.get(SOCKET_ENV)
        if not socket:
            raise UserError(f"serve_harness: no address, and {SOCKET_ENV} is not set")
        address = f"unix:{socket}"
    server = grpc.aio.server(options=_OPTIONS)
    handlers = _handlers(harness)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    if server.add_insecure_port(address) == 0 and not address.startswith("unix:"):
        raise UserError(f"serve_harness: cannot listen on {address}")
    await server.start()
    return server


def _handlers(harness: Harness) -> dict[str, grpc.RpcMethodHandler]:
    def unary(name: str, fn: Callable[[Any], Awaitable[Any]]) -> tuple[str, grpc.RpcMethodHandler]:
        request, response = _METHODS[name]

        async def handle(message: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await fn(message)
            except Exception as e:  # noqa: BLE001 - the harness's failure, as a status
                await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")

        return name, grpc.unary_unary_rpc_method_handler(
            handle,
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )

    async def describe(_: pb.DescribeRequest) -> pb.DescribeResponse:
        info = await harness.describe()
        out = pb.DescribeResponse(name=info.name, version=info.version)
        for t in info.tools:
            out.tools.add(
                name=t.name,
                description=t.description,
                permission=t.permission,
                data_class=t.data_class,
                reversible=t.reversible,
                exposure=t.exposure,
            )
        return out

    async def setup(r: pb.SetupRequest) -> pb.SetupResponse:
        fixtures = value_from_proto(r.fixtures)
        files = fixtures.get("files", {}) if isinstance(fixtures, dict) else {}
        task = TaskSetup(
            run_id=r.run_id,
            task_id=r.task_id,
            trial=r.trial,
            seed=r.seed if r.HasField("seed") else None,
            input=content_from_proto(r.input),
            fixtures=files if isinstance(files, dict) else {},
            workspace=Path(r.workspace) if r.workspace else None,
            metadata=_value_map_from_proto(r.metadata),
        )
        return pb.SetupResponse(session=await harness.setup(task))

    async def check(r: pb.CheckRequest) -> pb.CheckResponse:
        result = await harness.check(r.session)
        out = pb.CheckResponse()
        for c in result.checks:
            out.checks.add(name=c.name, passed=c.passed, detail=c.detail)
        if result.end_state is not None:
            _set_value(out.end_state, result.end_state)
        return out

    async def teardown(r: pb.TeardownRequest) -> pb.TeardownResponse:
        await harness.teardown(r.session)
        return pb.TeardownResponse()

    async def run(r: pb.RunRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for event in harness.run(r.session):
                out = pb.RunEvent()
                if isinstance(event, Final):
                    out.final.output.CopyFrom(content_to_proto(event.output))
                    _set_usage(out.final.usage, event.usage)
                    out.final.stop_reason = event.stop_reason
                else:
                    _set_step(out.step, event)
                yield out
        except Exception as e:  # noqa: BLE001 - the harness's failure, as a status
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")

    request, response = _METHODS["Run"]
    return dict(
        [
            unary("Describe", describe),
            unary("Setup", setup),
            unary("Check", check),
            unary("Teardown", teardown),
            (
                "Run",
                grpc.unary_stream_rpc_method_handler(
                    run,
                    request_deserializer=request.FromString,
                    response_serializer=response.SerializeToString,
                ),
            ),
        ]
    )

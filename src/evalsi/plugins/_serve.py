"""The plugin side: ordinary evalsi evaluators served over the evaluator plugin protocol.

A plugin process holds its evaluators (``@evaluator`` functions and classes, exactly as they
run in evalsi) and answers the host's batches with the same ``RecordRunner`` the host uses, so a
score is the same in or out of process. Batches of one stream run concurrently and are answered
as they finish (the protocol lets answers come back in any order); a sync evaluator runs in a
thread so a slow batch does not hold the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import grpc  # type: ignore[import-untyped]
import grpc.aio  # type: ignore[import-untyped]

from evalsi._proto.evalsi.plugin.v1alpha1 import plugin_pb2 as pb
from evalsi.core import Record, Scope, UserError
from evalsi.evaluators import Evaluator, RecordRunner, Registry
from evalsi.plugins._judge_endpoint import JudgeEndpoint, batch_judge
from evalsi.plugins._protocol import METHODS, OPTIONS, SERVICE, SOCKET_ENV
from evalsi.wire import (
    manifest_to_proto,
    record_from_proto,
    result_to_proto,
    struct_from_proto,
)


class _Plugin:
    """The evaluators a plugin serves, resolved by the refs the host sends."""

    def __init__(self, evaluators: Sequence[Evaluator], name: str, version: str) -> None:
        self.evaluators = list(evaluators)
        self.registry = Registry(self.evaluators)
        self.name = name
        self.version = version

    def describe(self) -> pb.DescribeResponse:
        out = pb.DescribeResponse(name=self.name, version=self.version)
        for ev in self.evaluators:
            out.evaluators.append(manifest_to_proto(ev.manifest))
        return out

    async def evaluate(self, request: pb.EvaluateRequest) -> pb.EvaluateResponse:
        out = pb.EvaluateResponse(batch_id=request.batch_id)
        ref = request.evaluator
        try:
            ev = self.registry.resolve(f"{ref.namespace}/{ref.name}@{ref.version}")
            bound = ev.bind(struct_from_proto(request.params))
            if bound.scope is not Scope.RECORD:
                raise UserError(f"{ev.ref} is {bound.scope.value}-scope; Evaluate is record scope")
            records = [record_from_proto(r) for r in request.records]
            j = request.judge
            judge = (
                JudgeEndpoint(j.name, j.base_url, j.model, j.api_key)
                if request.HasField("judge")
                else None
            )
            with batch_judge(judge):
                batch = await _grade(RecordRunner(bound), records)
        except Exception as e:  # noqa: BLE001 - the batch could not run: the host's infra error
            out.infra_error = f"{type(e).__name__}: {e}"
            return out
        for result in batch:
            out.results.append(result_to_proto(result))
        return out


async def _grade(runner: RecordRunner, records: list[Record]) -> Any:
    if runner.is_async:
        return await runner.run_async(records)
    return await asyncio.to_thread(runner.run, records)


def _handlers(plugin: _Plugin) -> dict[str, grpc.RpcMethodHandler]:
    async def describe(_: pb.DescribeRequest, context: grpc.aio.ServicerContext) -> Any:
        return plugin.describe()

    async def evaluate(
        requests: AsyncIterator[pb.EvaluateRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.EvaluateResponse]:
        answers: asyncio.Queue[pb.EvaluateResponse | None] = asyncio.Queue()

        async def answer(request: pb.EvaluateRequest) -> None:
            await answers.put(await plugin.evaluate(request))

        async def read() -> None:
            async with asyncio.TaskGroup() as group:
                async for request in requests:
                    group.create_task(answer(request))
            await answers.put(None)  # the host closed its side and every batch is answered

        reader = asyncio.create_task(read())
        try:
            while (response := await answers.get()) is not None:
                yield response
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def reduce(
        requests: AsyncIterator[pb.ReduceRequest], context: grpc.aio.ServicerContext
    ) -> Any:
        async for _ in requests:
            pass
        return pb.ReduceResponse(infra_error="this plugin host does not serve Reduce yet")

    def codec(name: str) -> dict[str, Any]:
        request, response = METHODS[name]
        return {
            "request_deserializer": request.FromString,
            "response_serializer": response.SerializeToString,
        }

    return {
        "Describe": grpc.unary_unary_rpc_method_handler(describe, **codec("Describe")),
        "Evaluate": grpc.stream_stream_rpc_method_handler(evaluate, **codec("Evaluate")),
        "Reduce": grpc.stream_unary_rpc_method_handler(reduce, **codec("Reduce")),
    }


async def serve_plugin(
    evaluators: Iterable[Evaluator],
    address: str | None = None,
    *,
    name: str = "plugin",
    version: str = "0.0.0",
) -> grpc.aio.Server:
    """Serve ``evaluators`` over the evaluator plugin protocol on ``address`` (default
    ``unix:$EVALSI_PLUGIN_SOCKET``, where a host that started this process listens for it);
    started, not awaited: ``await server.wait_for_termination()`` keeps it up.

    Example (a plugin with a ``main`` of its own, or a remote plugin service)::

        async def main() -> None:
            server = await serve_plugin([shouty], "127.0.0.1:7070", name="acme")
            await server.wait_for_termination()

        asyncio.run(main())
    """
    if address is None:
        socket = os.environ.get(SOCKET_ENV)
        if not socket:
            raise UserError(f"serve_plugin: no address, and {SOCKET_ENV} is not set")
        address = f"unix:{socket}"
    listed = list(evaluators)
    for ev in listed:
        if not isinstance(ev, Evaluator):
            raise UserError(f"serve_plugin: {ev!r} is not an evaluator (decorate it @evaluator)")
    server = grpc.aio.server(options=OPTIONS)
    handlers = _handlers(_Plugin(listed, name, version))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    if server.add_insecure_port(address) == 0 and not address.startswith("unix:"):
        raise UserError(f"serve_plugin: cannot listen on {address}")
    await server.start()
    return server

"""The host side: one plugin, started in its own virtual environment (or reached at its URL),
grading batches over one bidirectional ``Evaluate`` stream.

Failure is data, never a crashed run. When the process dies, the socket closes, an answer is
malformed or a batch outlives ``batch_timeout_s``, the batches in flight fail with
``InfraError("plugin")``, so their records are ERROR ``infra_error(plugin): …`` (counted as
infrastructure, not against the records). A hung plugin is killed. The next batch starts the
plugin again, at most ``max_restarts`` times in a row (an answered batch makes the budget
whole again, so a long-lived server survives rare crashes); past that every batch fails the
same way at once. A plugin that does not start the first time is a ``UserError`` naming
it, raised when the evaluator is bound, before the run.

One host may grade from several event loops in turn (``evalsi.evaluate`` runs one per call),
and a gRPC channel belongs to the loop it was made on (used from another after that one closed,
it fails inside grpc's poller). So the host talks to its plugin from a loop of its own, on a
thread of its own, and the callers' loops await that work; the process is a plain
``subprocess.Popen``, tied to no loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import grpc.aio  # type: ignore[import-untyped]

from evalsi._proto.evalsi.plugin.v1alpha1 import plugin_pb2 as pb
from evalsi.connectors import InfraError
from evalsi.core import EvaluationResult, EvaluatorRef, Outcome, Record, UserError
from evalsi.evaluators import RecordError, Skip
from evalsi.plugins._installed import InstalledPlugin
from evalsi.plugins._judge_endpoint import JudgeEndpoint
from evalsi.plugins._protocol import METHODS, OPTIONS, SERVICE, SOCKET_ENV
from evalsi.wire import record_to_proto, result_from_proto, struct_to_proto

BATCH_TIMEOUT_S = 300.0
MAX_RESTARTS = 3
START_TIMEOUT_S = 60.0
_NOT_PASSED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
"""The plugin gets the host's environment (its judge keys, proxies, locale; it is code the user
installed, as an entry-point evaluator in process would see it all) but none of the variables
that would make its Python import the host's packages instead of its venv's."""


@dataclass
class _Stream:
    """The open ``Evaluate`` stream and the batches waiting on it."""

    channel: Any
    call: Any
    generation: int
    pending: dict[str, asyncio.Future[pb.EvaluateResponse]] = field(default_factory=dict)
    broken: str | None = None
    reader: asyncio.Task[None] | None = None


class PluginHost:
    """One installed plugin, started on first use and restarted after a failure."""

    def __init__(
        self,
        plugin: InstalledPlugin,
        *,
        batch_timeout_s: float = BATCH_TIMEOUT_S,
        max_restarts: int = MAX_RESTARTS,
        start_timeout_s: float = START_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.batch_timeout_s = batch_timeout_s
        self.max_restarts = max_restarts
        self.start_timeout_s = start_timeout_s
        self.env = dict(env or {})
        self.restarts = 0
        self.started = False
        self._process: subprocess.Popen[bytes] | None = None
        self._generation = 0  # bumped at each (re)start: a stream of an older one is stale
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._stderr: Any = None
        self._stream_now: _Stream | None = None
        self._io: asyncio.AbstractEventLoop | None = None
        self._io_thread: threading.Thread | None = None
        self._open_lock: asyncio.Lock | None = None
        self._ids = itertools.count(1)
        self.description: pb.DescribeResponse | None = None
        """What the plugin's last ``Describe`` answered."""
        _LIVE.add(self)

    @property
    def address(self) -> str:
        if self.plugin.url:
            return self.plugin.url
        assert self._dir is not None
        return f"unix:{Path(self._dir.name) / 'plugin.sock'}"

    # -- starting -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the plugin (if it runs here) and wait until it answers ``Describe``.

        Raises:
            UserError: it did not start, naming the plugin and what its process said.
        """
        if self.started:
            return
        try:
            self._launch()
        except InfraError as e:
            self.close()
            raise UserError(
                f"plugin {self.name!r} did not start: {e.message}",
                hint=f"evalsi plugin list shows how it is installed; reinstall it with "
                f"evalsi plugin install {self.plugin.source}",
            ) from None
        self.started = True

    def _launch(self) -> None:
        """(Re)start the process and wait for ``Describe``; an ``InfraError`` says why not."""
        self._kill()
        self._generation += 1
        if not self.plugin.url:
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="evalsi-plugin-")
            path = Path(self._dir.name) / "plugin.sock"
            path.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
            env.update(self.env)
            env[SOCKET_ENV] = str(path)
            if self._stderr is not None:
                self._stderr.close()
            self._stderr = open(Path(self._dir.name) / "stderr.log", "w+b")  # noqa: SIM115
            try:
                self._process = subprocess.Popen(
                    [self.plugin.python, "-m", "evalsi.plugins", self.plugin.entry_point],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=self._stderr,
                    start_new_session=True,
                )
            except OSError as e:
                raise InfraError(
                    "plugin", f"cannot run {self.plugin.python}: {e.strerror}"
                ) from None
        self._describe()

    def _describe(self) -> None:
        """Wait until the plugin accepts connections, then ask ``Describe``. Listening is
        checked with a plain socket: a gRPC call to a socket not there yet backs off for a
        second or more before trying again."""
        deadline = time.monotonic() + self.start_timeout_s
        while not _listening(self.address):
            if self._process is not None and self._process.poll() is not None:
                raise InfraError(
                    "plugin",
                    f"its process exited ({self._process.returncode}) before serving"
                    + (f": {tail}" if (tail := self.stderr_tail()) else ""),
                )
            if time.monotonic() >= deadline:
                raise InfraError(
                    "plugin", f"nothing listened at {self.address} within {self.start_timeout_s:g}s"
                )
            time.sleep(0.02)
        channel = grpc.insecure_channel(self.address, options=OPTIONS)
        try:
            describe = channel.unary_unary(
                f"/{SERVICE}/Describe",
                request_serializer=pb.DescribeRequest.SerializeToString,
                response_deserializer=pb.DescribeResponse.FromString,
            )
            timeout = max(deadline - time.monotonic(), 5.0)
            self.description = describe(pb.DescribeRequest(), timeout=timeout)
        except grpc.RpcError as e:
            raise InfraError("plugin", f"Describe failed: {e.code().name}: {e.details()}") from None
        finally:
            channel.close()

    def stderr_tail(self, size: int = 600) -> str:
        """The end of what the plugin process wrote to stderr (its traceback, usually)."""
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            end = self._stderr.tell()
            self._stderr.seek(max(0, end - size))
            return bytes(self._stderr.read()).decode(errors="replace").strip()
        return ""

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(3.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        """Stop the plugin process and the host's own loop."""
        io, thread, stream = self._io, self._io_thread, self._stream_now
        self._io = self._io_thread = self._stream_now = self._open_lock = None
        if io is not None and thread is not None:
            if stream is not None:
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(_close(stream), io).result(10.0)
            io.call_soon_threadsafe(io.stop)
            thread.join(10.0)
            if not thread.is_alive():
                io.close()
        self._kill()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        self.started = False

    # -- grading --------------------------------------------------------------------------------
    async def evaluate(
        self,
        ref: EvaluatorRef,
        params: Mapping[str, Any],
        records: Sequence[Record],
        *,
        judge: JudgeEndpoint | None = None,
    ) -> list[Any]:
        """One batch graded by the plugin: per record a list of scores, a ``Skip`` or a
        ``RecordError``, as a batch evaluator returns them. ``judge``: the run's judge the
        evaluator asked for, as served for this batch.

        Raises:
            InfraError: the batch could not be graded (kind ``plugin``).
        """
        batch = self._evaluate(ref, params, records, judge)
        work = asyncio.run_coroutine_threadsafe(batch, self._loop())
        return await asyncio.wrap_future(work)  # cancelling the caller cancels the batch

    def _loop(self) -> asyncio.AbstractEventLoop:
        with _LOOP_LOCK:
            if self._io is None:
                io = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=io.run_forever, name=f"evalsi-plugin-{self.name}", daemon=True
                )
                thread.start()
                self._io, self._io_thread = io, thread
            return self._io

    async def _evaluate(
        self,
        ref: EvaluatorRef,
        params: Mapping[str, Any],
        records: Sequence[Record],
        judge: JudgeEndpoint | None,
    ) -> list[Any]:
        stream = await self._stream()
        batch_id = str(next(self._ids))
        request = pb.EvaluateRequest(batch_id=batch_id, params=struct_to_proto(dict(params)))
        if judge is not None:
            j = request.judge
            j.name, j.base_url, j.model, j.api_key = (
                judge.name,
                judge.base_url,
                judge.model,
                judge.api_key,
            )
        request.evaluator.namespace, request.evaluator.name = ref.namespace, ref.name
        request.evaluator.version = ref.version
        for record in records:
            request.records.append(record_to_proto(record))
        future: asyncio.Future[pb.EvaluateResponse] = asyncio.get_running_loop().create_future()
        stream.pending[batch_id] = future
        try:
            # the write is bounded too: a plugin that stops reading stalls it (flow control)
            await asyncio.wait_for(stream.call.write(request), self.batch_timeout_s)
            response = await asyncio.wait_for(future, self.batch_timeout_s)
        except TimeoutError:
            self._broken(stream, f"a batch got no answer within {self.batch_timeout_s:g}s")
            self._kill()  # it hangs: the next batch starts it again
            raise self._infra(f"batch timed out after {self.batch_timeout_s:g}s") from None
        except grpc.aio.AioRpcError as e:
            self._broken(stream, f"{e.code().name}: {e.details() or ''}")
            raise self._infra(stream.broken or "") from None
        except (grpc.aio.UsageError, asyncio.InvalidStateError) as e:
            self._broken(stream, f"the stream is closed ({e})")
            raise self._infra(stream.broken or "") from None
        finally:
            stream.pending.pop(batch_id, None)
        values = self._values(response, len(records))
        self.restarts = 0  # an answered batch: the plugin works again, the budget is whole
        return values

    def _values(self, response: pb.EvaluateResponse, n: int) -> list[Any]:
        if response.infra_error:
            raise self._infra(f"the plugin could not run the batch: {response.infra_error}")
        if len(response.results) != n:
            raise self._infra(f"malformed answer: {len(response.results)} results for {n} records")
        values: list[Any] = []
        for message in response.results:
            try:
                result: EvaluationResult = result_from_proto(message)
            except Exception as e:  # noqa: BLE001 - a malformed answer is the plugin's fault
                raise self._infra(f"malformed answer: {e}") from None
            if result.outcome is Outcome.SCORED and result.scores:
                values.append(result.scores)
            elif result.outcome is Outcome.SKIPPED:
                values.append(Skip(result.reason))
            elif result.outcome is Outcome.SCORED:
                values.append(RecordError("malformed answer: SCORED without scores"))
            else:
                values.append(RecordError(result.reason or result.outcome.name.lower()))
        return values

    def _dead(self, stream: _Stream | None) -> bool:
        """Whether the plugin must start again: its process is gone (it died, or was killed
        after a hang), or this generation's stream broke."""
        if not self.plugin.url and (self._process is None or self._process.poll() is not None):
            return True
        return (
            stream is not None
            and stream.broken is not None
            and (stream.generation == self._generation)
        )

    def _infra(self, why: str) -> InfraError:
        return InfraError("plugin", f"{self.name}: {why}")

    async def _stream(self) -> _Stream:
        async with self._lock():
            return await self._open()

    def _lock(self) -> asyncio.Lock:
        # made on the host's loop, once: concurrent batches open one stream, not several
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        return self._open_lock

    async def _open(self) -> _Stream:
        stream = self._stream_now
        if stream is not None and stream.broken is None and stream.generation == self._generation:
            return stream
        if stream is not None:
            await _close(stream)
        if not self.started:
            await asyncio.to_thread(self.start)
        elif self._dead(stream):
            if self.restarts >= self.max_restarts:
                raise self._infra(f"gave up after {self.max_restarts} restarts")
            self.restarts += 1
            await asyncio.to_thread(self._launch)
        channel = grpc.aio.insecure_channel(self.address, options=OPTIONS)
        request, response = METHODS["Evaluate"]
        call = channel.stream_stream(
            f"/{SERVICE}/Evaluate",
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )()
        stream = _Stream(channel, call, self._generation)
        stream.reader = asyncio.get_running_loop().create_task(self._read(stream))
        self._stream_now = stream
        return stream

    async def _read(self, stream: _Stream) -> None:
        """Hand each answer to the batch waiting for it; a closed or failed stream fails them
        all."""
        try:
            while True:
                response = await stream.call.read()
                if response is grpc.aio.EOF:
                    self._broken(stream, "the plugin closed the stream")
                    return
                future = stream.pending.get(response.batch_id)
                if future is not None and not future.done():
                    future.set_result(response)
        except grpc.aio.AioRpcError as e:
            why = f"{e.code().name}: {e.details() or ''}"
            if self._process is not None and self._process.poll() is not None:
                why = f"its process exited ({self._process.returncode}); {why}"
            self._broken(stream, why)
        except asyncio.CancelledError:
            self._broken(stream, "the host stopped reading")
            raise

    def _broken(self, stream: _Stream, why: str) -> None:
        if stream.broken is None:
            stream.broken = why
        for future in stream.pending.values():
            if not future.done():
                future.set_exception(self._infra(stream.broken))
        stream.pending.clear()


async def _close(stream: _Stream) -> None:
    if stream.reader is not None and not stream.reader.done():
        stream.reader.cancel()
    stream.call.cancel()
    with contextlib.suppress(TimeoutError):  # never let a stuck channel hold the run open
        await asyncio.wait_for(stream.channel.close(), 5.0)


def _listening(address: str) -> bool:
    """Whether something accepts connections at a ``unix:PATH`` or ``HOST:PORT`` address."""
    try:
        if address.startswith("unix:"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1.0)
                s.connect(address.removeprefix("unix:"))
        else:
            host, _, port = address.rpartition(":")
            socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
    except (OSError, ValueError):
        return False
    return True


_LOOP_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[PluginHost] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """No plugin process outlives the evalsi that started it."""
    for host in list(_LIVE):
        host._kill()

"""A Python callable as the target: ``module:function``, sync or async.

The callable receives the sample's input as plain data (text as ``str``, JSON as it is, chat
messages as a list of dicts) and returns the output: a ``str`` (text), a ``Content``, a list of
chat-message dicts (messages), or any other JSON value; an agent returns a ``TargetOutput``
with its ``trajectory`` (and usage, when it knows it). Sync callables run in a worker thread so
they never block the event loop. Whatever the callable raises is a ``TargetError`` recorded on
that sample; cancellation is never swallowed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import time
from collections.abc import Callable
from typing import Any

from evalsi.connectors._errors import InfraError, TargetError
from evalsi.connectors._types import InputLike, TargetOutput, plain_input
from evalsi.core import Content, Usage, UserError


def load_callable(ref: str) -> Callable[..., Any]:
    """Import ``module:attr.path`` and return the callable, or raise a ``UserError`` naming it.

    Example:
        >>> load_callable("os.path:basename")("/a/b.txt")
        'b.txt'
    """
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise UserError(
            f"python target {ref!r} is not of the form module:function",
            hint="for example python: my_app.agent:answer",
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(
            f"python target {ref!r}: cannot import module {module_name!r}: {e}",
            hint="is the module on PYTHONPATH (or installed in this environment)?",
        ) from e
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise UserError(
                f"python target {ref!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from e
    if not callable(obj):
        raise UserError(f"python target {ref!r} is not callable ({type(obj).__name__})")
    return obj  # type: ignore[no-any-return]


def to_content(value: Any) -> Content:
    """A callable's return value as ``Content``."""
    if isinstance(value, Content):
        return value
    if isinstance(value, str):
        return Content.of_text(value)
    return Content.from_value(value)


class PythonTarget:
    """Call ``module:function`` once per sample and trial.

    Example:
        >>> import asyncio
        >>> out = asyncio.run(PythonTarget("os.path:basename").invoke("/a/b.txt"))
        >>> out.output.text
        'b.txt'
    """

    connector = "python"
    supports_seed = False

    def __init__(self, ref: str | Callable[..., Any], *, timeout: float | None = None) -> None:
        if callable(ref):
            self.ref = f"{getattr(ref, '__module__', '?')}:{getattr(ref, '__qualname__', '?')}"
            self._fn: Callable[..., Any] = ref
        else:
            self.ref = ref
            self._fn = load_callable(ref)
        self.timeout = timeout
        self._is_async = inspect.iscoroutinefunction(self._fn) or (
            not inspect.isroutine(self._fn)
            and inspect.iscoroutinefunction(type(self._fn).__call__)  # an async callable object
        )

    def __repr__(self) -> str:
        return f"PythonTarget({self.ref!r})"

    def describe(self) -> dict[str, Any]:
        return {"connector": self.connector, "ref": self.ref}

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        del seed  # a callable gets the input only
        argument = plain_input(input)
        started = time.perf_counter()
        scope: asyncio.Timeout | None = None
        try:
            if self.timeout is None:
                value = await self._call(argument)
            else:
                async with asyncio.timeout(self.timeout) as scope:
                    value = await self._call(argument)
        except InfraError:  # the target says its own infrastructure failed (not the system)
            raise
        except Exception as e:  # the target's failure is data on this sample
            if scope is not None and scope.expired():
                # A sync callable keeps running in its thread: Python cannot stop a thread.
                raise InfraError(
                    "timeout", f"python target {self.ref} did not return within {self.timeout:g}s"
                ) from e
            raise TargetError(f"python target {self.ref} raised {type(e).__name__}: {e}") from e
        latency_ms = (time.perf_counter() - started) * 1000.0
        if isinstance(value, TargetOutput):  # an agent: its output, usage and trajectory
            if value.usage.latency_ms is None:
                value = dataclasses.replace(
                    value, usage=dataclasses.replace(value.usage, latency_ms=latency_ms)
                )
            return value
        return TargetOutput(output=to_content(value), usage=Usage(latency_ms=latency_ms), raw=None)

    async def _call(self, argument: Any) -> Any:
        if self._is_async:
            return await self._fn(argument)
        value = await asyncio.to_thread(self._fn, argument)
        if inspect.isawaitable(value):  # a sync wrapper that hands back a coroutine
            value = await value
        return value

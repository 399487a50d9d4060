"""A time cap on one evaluator call made in a worker thread.

A thread cannot be killed, but a thread running Python can be interrupted: CPython's
``PyThreadState_SetAsyncExc`` makes an exception rise in another thread at its next bytecode.
One watchdog thread wakes when the earliest armed call is due and raises ``CallExpired`` in the
thread running it; the runner catches it and records the call as an ERROR, ``timed out after
Ns``, and goes on with the next record.

What it stops: Python code, however long it loops, within a few milliseconds of the limit.
What it cannot stop: a single call into C that does not come back (a ``time.sleep(3600)``, a
blocking socket read, a C extension's long loop). The exception waits until that call returns;
the thread, and the request it serves, wait with it. The event loop does not: it runs in
another thread and gets the interpreter every 5 ms (``sys.getswitchinterval``) as long as the C
code releases the GIL or Python code is running.

Arming costs two uncontended lock round trips per call, so only the server, where a stalled
call would cost every other client, asks for a limit.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class CallExpired(BaseException):
    """Raised inside a call that outlived its time limit. A ``BaseException``, so an
    evaluator's own ``except Exception`` does not swallow it."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int


class _Slot:
    """The call one thread is running under a limit. ``lock`` orders arming, firing and
    disarming, so the exception is only ever raised into the call it was meant for."""

    __slots__ = ("__weakref__", "deadline", "fired", "ident", "lock", "token")

    def __init__(self) -> None:
        self.ident = threading.get_ident()
        self.lock = threading.Lock()
        self.token = 0
        self.deadline = _NEVER
        self.fired = -1


_NEVER = float("inf")


class _Watchdog:
    """One thread for every limited call: it sleeps until the earliest deadline of the slots
    (one per thread, so a handful), then checks them all. A call that ends in time leaves
    nothing behind, so at a thousand calls a second it still wakes about once a limit."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._slots: weakref.WeakSet[_Slot] = weakref.WeakSet()
        self._next = _NEVER  # when the watchdog wakes next
        self._thread: threading.Thread | None = None

    def add(self, slot: _Slot) -> None:
        with self._cond:
            self._slots.add(slot)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="evalsi-call-timer", daemon=True
                )
                self._thread.start()

    def armed(self, deadline: float) -> None:
        if deadline < self._next:  # a stale read only costs one needless wake-up
            with self._cond:
                self._next = min(self._next, deadline)
                self._cond.notify()

    def _watch(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [s for s in self._slots if s.deadline <= now]
                self._next = min((s.deadline for s in self._slots), default=_NEVER)
                if not due:
                    self._cond.wait(None if self._next == _NEVER else self._next - now)
                    continue
            for slot in due:
                with slot.lock:
                    if slot.deadline <= now:  # still the same call: disarming resets it
                        slot.fired = slot.token
                        slot.deadline = _NEVER
                        _set_async_exc(slot.ident, ctypes.py_object(CallExpired))


_WATCHDOG = _Watchdog()
_local = threading.local()


def call_with_limit(fn: Callable[[Any], T], arg: Any, seconds: float) -> tuple[T | None, bool]:
    """``fn(arg)``, stopped after ``seconds``: (its value, False), or (None, True) when it
    ran out of time. Its own exceptions propagate as they are."""
    slot: _Slot | None = getattr(_local, "slot", None)
    if slot is None:
        slot = _local.slot = _Slot()
        _WATCHDOG.add(slot)
    token = slot.token + 1
    try:
        try:  # armed inside: an exception raised the moment it is armed is still ours
            with slot.lock:
                slot.token = token
                slot.deadline = deadline = time.monotonic() + seconds
            _WATCHDOG.armed(deadline)
            value = fn(arg)
        finally:
            with slot.lock:
                slot.deadline = _NEVER
                fired = slot.fired == token
                if fired:  # raised but maybe not delivered yet: withdraw it
                    _set_async_exc(slot.ident, ctypes.py_object())
    except CallExpired:
        return None, True
    if fired:  # it came back (or swallowed the exception) past its limit
        return None, True
    return value, False


def timed_out(seconds: float) -> str:
    """The ERROR reason of a call stopped by its limit."""
    return f"timed out after {seconds:g}s"

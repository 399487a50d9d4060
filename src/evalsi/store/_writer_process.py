"""The writer process's entry point: ``python -m evalsi.store._writer_process DB RUN_ID``.

Kept apart from ``_writer`` so that running it as ``__main__`` does not import that module twice.
"""

from __future__ import annotations

import signal
import sys

from evalsi.store._sql import SqlStore
from evalsi.store._writer import decode


def serve(location: str, run_id: str) -> int:
    """The writer process (``python -m evalsi.store._writer``): frames on stdin, status out.

    Each frame is an 8-byte little-endian length and an orjson message; a zero-length frame
    means "done". Every message is committed before the next is read, so when the parent dies
    (stdin closes) everything received is already in the store.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    inbox, status = sys.stdin.buffer, sys.stdout.buffer
    store = SqlStore.open(location)
    try:
        while True:
            head = inbox.read(8)
            if len(head) < 8:
                return 0  # the parent went away
            size = int.from_bytes(head, "little")
            if size == 0:
                break
            store.write_batches(run_id, decode(inbox.read(size)))
        status.write(b"ok\n")
        return 0
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        status.write(f"{type(e).__name__}: {e}\n".encode())
        return 1
    finally:
        status.flush()
        store.close()


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.argv[2]))

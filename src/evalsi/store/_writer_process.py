"""The writer process: ``python -m evalsi.store._writer_process DB_PATH RUN_ID``.

Reads frames from stdin (an 8-byte little-endian length, then an orjson message from
``encode_batches``; a zero length means "done"), upserts and commits each one, and answers
``ok`` (or the error) on stdout when told it is done. Every message is committed before the
next is read, so when the parent dies (stdin closes) everything received is in the store.
It imports sqlite3 and the SQLAlchemy-free row writer only, so it starts in tens of ms.
"""

from __future__ import annotations

import signal
import sqlite3
import sys

from evalsi.store._rows import RowWriter, decode_batches, sqlite_pragmas


def serve(path: str, run_id: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    inbox, status = sys.stdin.buffer, sys.stdout.buffer
    conn = sqlite3.connect(path)
    try:
        sqlite_pragmas(conn)
        row = conn.execute("SELECT pk FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise LookupError(f"run {run_id} is not in {path}")
        writer = RowWriter(conn, int(row[0]))
        while True:
            head = inbox.read(8)
            if len(head) < 8:
                return 0  # the parent went away
            size = int.from_bytes(head, "little")
            if size == 0:
                break
            writer.write(decode_batches(inbox.read(size)))
        status.write(b"ok\n")
        return 0
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        status.write(f"{type(e).__name__}: {e}\n".encode())
        return 1
    finally:
        status.flush()
        conn.close()


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.argv[2]))

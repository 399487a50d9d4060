"""A function tool with a side effect, for the agent kill -9 + ``--resume`` test
(``tests/integration/test_int_agent_resume.py``).

``record(sample)`` appends ``<sample>/<nonce>`` to the ledger file named by
``$EVALSI_TEST_LEDGER`` (a fresh nonce per call, so two calls for the same sample are told
apart), then takes a while, so a run is slow enough to be killed while a call is in flight. The
result names the nonce, so the stored trajectory says which ledger line a task wrote.
"""

from __future__ import annotations

import os
import time
import uuid

LEDGER_ENV = "EVALSI_TEST_LEDGER"
HOLD_S = 0.3  # after the side effect: the window in which the test's kill lands mid-task


def record(sample: str) -> str:
    """Record that ``sample`` was handled."""
    nonce = uuid.uuid4().hex[:12]
    line = f"{sample}/{nonce}\n".encode()
    fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write of a short line under O_APPEND: lines never interleave
    finally:
        os.close(fd)
    time.sleep(HOLD_S)
    return f"recorded {sample} {nonce}"

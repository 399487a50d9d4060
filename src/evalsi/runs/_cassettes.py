"""A recorded agent run's cassettes as a replay reads them (``agents.Replay``)."""

from __future__ import annotations

from typing import Any

from evalsi.core import Cassette, UserError
from evalsi.store import SqlStore


class StoredCassettes:
    """The recorded run's cassettes, read from the store as the replay's tasks start
    (``agents.Replay``).

    Every task's index is read once (small). Responses are read a block of tasks at a time, in
    the recorded run's order, which is the order the replay starts its tasks in; only the
    block in use and the one before it are held, so memory stays flat however long the run.
    """

    BLOCK = 256

    def __init__(self, db: SqlStore, run_id: str, live_after: int | None = None) -> None:
        self.db = db
        self.run_id = run_id
        self.live_after = live_after
        self._index = db.cassette_index(run_id)
        self._position = {task: i for i, task in enumerate(self._index)}
        self._order = list(self._index)
        self._blocks: dict[int, dict[str, bytes]] = {}

    def __len__(self) -> int:
        return len(self._index)

    def cassette(self, sample_id: str, trial: int) -> Cassette | None:
        index = self._index.get((sample_id, trial))
        if index is None:
            return None
        blobs = self._block(self._position[(sample_id, trial)] // self.BLOCK)
        try:
            return Cassette.from_index(index, blobs)
        except (ValueError, TypeError, KeyError) as e:
            raise UserError(
                f"run {self.run_id}: the cassette of sample {sample_id!r} trial {trial} is "
                f"damaged: {e}"
            ) from None

    def _block(self, n: int) -> dict[str, bytes]:
        block = self._blocks.get(n)
        if block is None:
            tasks = self._order[n * self.BLOCK : (n + 1) * self.BLOCK]
            keys = [k for task in tasks for k in Cassette.keys_of(self._index[task])]
            block = self.db.cassette_blobs(keys)
            self._blocks = {k: v for k, v in self._blocks.items() if k == n - 1}
            self._blocks[n] = block
        return block

    def provenance(self) -> dict[str, Any]:
        """What the replaying run stores of its source (``spec.replay``)."""
        return {"of": self.run_id, "branch_from_step": self.live_after}


__all__ = ["StoredCassettes"]

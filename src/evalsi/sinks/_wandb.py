"""Results into Weights & Biases through ``wandb`` (the ``wandb`` extra), offline by default:
the run is written under a directory and synced later with ``wandb sync``, so nothing leaves
the machine unless asked. One W&B run per evalsi run (its id derived from the evalsi run's,
resumed on a re-export): each metric's mean, interval and n in the run's summary, the gates
and status in its config, the per-record results as a table."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.core import UserError, require_extra
from evalsi.sinks._sink import RESULT_COLUMNS, Receipt, ResultRow, RunHeader, gate_lines, metric_key

MAX_TABLE_ROWS = 200_000  # W&B's own cap on a table logged from a run
_ID = re.compile(r"[^A-Za-z0-9_-]")


class WandbSink:
    kind = "wandb"

    def __init__(self, project: str, mode: str = "", directory: str = "", entity: str = "") -> None:
        require_extra("the wandb sink", "wandb", "wandb")
        self.project = project
        self.mode = mode or "offline"
        self.directory = directory or str(Path(".evalsi") / "wandb")
        self.entity = entity or None
        self.target = f"wandb {self.mode} {project}"
        self.run: Any = None
        self.rows: list[list[Any]] = []
        self.count = 0
        self.header: RunHeader | None = None

    def begin(self, run: RunHeader) -> None:
        import wandb

        self.header = run
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        try:
            self.run = wandb.init(
                project=self.project,
                entity=self.entity,
                mode=self.mode,  # type: ignore[arg-type]  # checked by the schema
                dir=self.directory,
                id=_ID.sub("-", f"evalsi-{run.run_id}")[:64],
                name=run.name or run.run_id,
                resume="allow",
                config={
                    "evalsi.run_id": run.run_id,
                    "evalsi.kind": run.kind,
                    "evalsi.project": run.project,
                    "evalsi.dataset_version": run.dataset_version,
                },
                settings=wandb.Settings(silent=True, console="off"),
                reinit="create_new",
            )
        except Exception as e:  # noqa: BLE001 - wandb's own errors
            raise UserError(f"wandb sink {self.project}: {e}") from None

    def write(self, rows: Sequence[ResultRow]) -> None:
        assert self.header is not None
        for row in rows:
            self.count += 1
            if len(self.rows) < MAX_TABLE_ROWS:
                self.rows.append(row.as_list(self.header.run_id))

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        import wandb

        assert self.run is not None
        assert self.header is not None
        for m in summary.get("metrics", ()) or ():
            key = metric_key(m)
            ci = m.get("ci") or [None, None]
            values = {"mean": m.get("mean"), "ci_low": ci[0], "ci_high": ci[1], "n": m.get("n")}
            for name, value in values.items():
                if value is not None:
                    self.run.summary[f"{key}.{name}"] = value
        self.run.config.update(
            {f"evalsi.gate.{i}": f"{v}: {e}" for i, (e, v) in enumerate(gate_lines(summary))}
            | {"evalsi.status": self.header.status},
            allow_val_change=True,
        )
        self.run.log({"evalsi/results": wandb.Table(columns=list(RESULT_COLUMNS), data=self.rows)})
        run_id, directory = self.run.id, str(getattr(self.run, "dir", ""))
        self.run.finish()
        self.run = None
        return Receipt(self.kind, self.target, self.count, {"run_id": run_id, "dir": directory})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish(exit_code=1)
            self.run = None

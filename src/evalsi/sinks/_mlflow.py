"""Results into an MLflow tracking server, through MLflow's own client (``mlflow-skinny``,
the ``mlflow`` extra).

One MLflow run per evalsi run, found again by its ``evalsi.run_id`` tag, so exporting a run
twice updates the same MLflow run. Each metric's mean is an MLflow metric; its interval, n and
method are params (``KEY.ci_low`` …: MLflow params are write-once, and a stored run's figures
never change); the gates and the run's status are tags; the per-record results are a table
artifact (``evalsi/results.json``, the JSON table form MLflow's UI shows).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.core import UserError, require_extra
from evalsi.sinks._sink import Receipt, ResultRow, RunHeader, gate_lines, metric_key
from evalsi.sinks._staging import JsonTable

DEFAULT_EXPERIMENT = "evalsi"
TABLE = "evalsi/results.json"
_BATCH = {"metrics": 1000, "params": 100, "tags": 100}  # MLflow's limits per log_batch


class MlflowSink:
    kind = "mlflow"

    def __init__(self, tracking_uri: str, experiment: str = "") -> None:
        require_extra("the mlflow sink", "mlflow", "mlflow")
        from mlflow.tracking import MlflowClient

        self.target = tracking_uri
        self.experiment = experiment or DEFAULT_EXPERIMENT
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.table: JsonTable | None = None
        self.run_id = ""
        self.experiment_id = ""
        self.header: RunHeader | None = None

    def begin(self, run: RunHeader) -> None:
        self.header = run
        try:
            found = self.client.get_experiment_by_name(self.experiment)
            self.experiment_id = (
                found.experiment_id
                if found is not None
                else self.client.create_experiment(self.experiment)
            )
            existing = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`evalsi.run_id` = '{run.run_id}'",
                max_results=1,
            )
            if existing:
                self.run_id = existing[0].info.run_id
            else:
                created = self.client.create_run(
                    self.experiment_id,
                    run_name=run.name or run.run_id,
                    start_time=int(run.created_at * 1000),
                    tags={"evalsi.run_id": run.run_id},
                )
                self.run_id = created.info.run_id
        except Exception as e:  # noqa: BLE001 - MLflow raises its own and requests' errors
            raise UserError(f"mlflow sink {self.target}: {e}") from None
        self.table = JsonTable(run.run_id)

    def write(self, rows: Sequence[ResultRow]) -> None:
        assert self.table is not None
        self.table.write(rows)

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        from mlflow.entities import Metric, Param, RunTag

        assert self.table is not None
        assert self.header is not None
        run = self.header
        now = int(time.time() * 1000)
        metrics: list[Any] = []
        params: list[Any] = []
        for m in summary.get("metrics", ()) or ():
            key = metric_key(m)
            if m.get("mean") is not None:
                metrics.append(Metric(key, float(m["mean"]), now, 0))
            ci = m.get("ci") or [None, None]
            for name, value in (
                ("n", m.get("n")),
                ("ci_low", ci[0]),
                ("ci_high", ci[1]),
                ("ci_method", m.get("ci_method")),
            ):
                if value is not None:
                    params.append(Param(f"{key}.{name}", str(value)))
        tags = [
            RunTag("evalsi.run_id", run.run_id),
            RunTag("evalsi.kind", run.kind),
            RunTag("evalsi.status", run.status),
            RunTag("evalsi.project", run.project),
            RunTag("evalsi.dataset_version", run.dataset_version),
            RunTag("mlflow.loggedArtifacts", f'[{{"path": "{TABLE}", "type": "table"}}]'),
            *(
                RunTag(f"evalsi.gate.{i}", f"{verdict}: {expr}"[:5000])
                for i, (expr, verdict) in enumerate(gate_lines(summary))
            ),
        ]
        path = self.table.done()
        try:
            for start in range(0, max(len(metrics), len(params), len(tags)), 100):
                self.client.log_batch(
                    self.run_id,
                    metrics=metrics[start : start + 100],
                    params=params[start : start + 100],
                    tags=tags[start : start + 100],
                )
            self.client.log_artifact(self.run_id, str(path), artifact_path="evalsi")
            failed = run.status not in ("done", "completed")
            self.client.set_terminated(
                self.run_id,
                status="FAILED" if failed else "FINISHED",
                end_time=int((run.finished_at or time.time()) * 1000),
            )
        except Exception as e:  # noqa: BLE001
            raise UserError(f"mlflow sink {self.target}: {e}") from None
        return Receipt(
            self.kind,
            self.target,
            self.table.rows,
            {"experiment_id": self.experiment_id, "run_id": self.run_id, "table": TABLE},
        )

    def close(self) -> None:
        if self.table is not None:
            self.table.close()

"""``evalsi export``: a stored run sent to MLflow, an S3 bucket, Weights & Biases or a webhook."""

from __future__ import annotations

import argparse
from typing import Any

from evalsi.cli._output import note, print_json
from evalsi.core import UserError

EPILOG = """\
destinations (--to, repeatable):
  mlflow:http://127.0.0.1:5000     an MLflow tracking server (experiment "evalsi")
  s3://BUCKET[/PREFIX]             results.parquet and summary.json under PREFIX/RUN_ID/
                                   (credentials and AWS_ENDPOINT_URL from the environment)
  webhook:https://HOST/PATH        the summary as JSON (sign it: --sinks FILE with secretRef)
  wandb:PROJECT                    Weights & Biases, offline under .evalsi/wandb
--sinks FILE takes every option (experiment, endpointUrl, region, secretRef, mode, dir) as a
YAML list under `sinks:`, the entries of a run spec's spec.sinks. With neither, the run is sent
to the sinks its own spec names.

examples:
  evalsi export latest --to mlflow:http://127.0.0.1:5000
  evalsi export 20261129-174501-3f9a2c --to s3://evals/nightly --format json
  evalsi export latest --sinks sinks.yaml

Sending a run again updates what it sent (the same MLflow run, the same S3 keys, the same W&B
run and webhook delivery id): no duplicates. Exit codes: 0 every sink took it, 3 a sink
failed (the message says why; the run is unchanged in the store), 2 bad input.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "export",
        help="send a stored run to MLflow, S3, Weights & Biases or a webhook",
        description="Send a stored run's results (the per-record scores and the summary with "
        "intervals and gates) to the tools you already use. RUN may be a unique id prefix or "
        "`latest`.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument(
        "--to", action="append", default=[], metavar="DEST", help="a destination (above)"
    )
    p.add_argument("--sinks", metavar="FILE", help="a YAML file with `sinks:` entries")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.set_defaults(handler=export)


def export(args: argparse.Namespace) -> int:
    from evalsi.runs import export_run, open_store
    from evalsi.specs import load_sinks, sink_of

    sinks = [sink_of(t) for t in args.to]
    if args.sinks:
        sinks.extend(load_sinks(args.sinks))
    db = open_store(args.store, create=False)
    info = db.get_run(args.run_id)
    if not sinks:
        from evalsi.specs import sinks_from

        stored = (info.spec.get("spec") or {}).get("sinks") or []
        if not stored:
            raise UserError(
                f"run {info.id} names no sinks",
                hint="give --to DEST or --sinks FILE (see evalsi export --help)",
            )
        sinks.extend(sinks_from({"sinks": stored}, f"run {info.id}'s spec.sinks"))
    exports = export_run(db, info.id, sinks)
    if args.format == "json":
        print_json({"run_id": info.id, "exports": [e.to_dict() for e in exports]})
    else:
        for e in exports:
            if e.receipt is not None:
                remote = ", ".join(f"{k}={v}" for k, v in e.receipt["remote"].items() if v)
                note(f"sent to {e.sink}: {e.receipt['rows']} rows ({remote})")
            else:
                note(f"NOT sent to {e.sink}: {e.error}")
    return 0 if all(e.receipt is not None for e in exports) else 3

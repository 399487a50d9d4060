"""``evalsi worker``: execute a cluster's queued tasks; ``evalsi cluster status``: what the
queues and workers are doing (docs/guides/deploy.md)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from evalsi.cli._output import note, print_json
from evalsi.core import require_extra

EPILOG = """\
The worker reads the server's evalsi.yaml: `cluster:` (the NATS URL and the pools) and
`storage: {postgres: {dsn}}` (where it writes results), and the same judges, egress rules,
limits and installed plugins as the server. Start as many as you like, on any machine that
reaches NATS and PostgreSQL; each pulls shards of tasks of its pool (`work.<pool>`).

examples:
  evalsi worker --config evalsi.yaml
  evalsi worker --config evalsi.yaml --pool judge --name judge-1

SIGTERM or Ctrl-C drains: no new shard is taken, those in flight finish within --drain
seconds and the rest go back to the queue for another worker. Exit codes: 0 stopped cleanly,
2 bad configuration.
"""

DEFAULT_CONFIG = "evalsi.yaml"


def register(commands: Any) -> None:
    p = commands.add_parser(
        "worker",
        help="execute a cluster's queued tasks (NATS JetStream, PostgreSQL)",
        description="Pull shards of run tasks from the cluster's work queue, execute them "
        "(target calls, judges, sandboxed evaluators) and store the results.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config", type=Path, metavar="FILE", help="evalsi.yaml (default: ./evalsi.yaml)"
    )
    p.add_argument(
        "--pool", default="default", metavar="NAME", help="the pool to work (default: default)"
    )
    p.add_argument(
        "--name", default="", help="this worker's name in logs and the store (default: HOST:PID)"
    )
    p.add_argument(
        "--drain", type=float, default=30.0, metavar="SECONDS",
        help="how long in-flight shards may finish after SIGTERM (default: 30)",
    )  # fmt: skip
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=worker_command)

    c = commands.add_parser(
        "cluster",
        help="the cluster's queues, workers and runs in progress",
        description="What the cluster configured in evalsi.yaml is doing.",
    )
    sub = c.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    s = sub.add_parser(
        "status",
        help="pools (pending, in flight, redelivered), workers, dead letters, runs in progress",
        description="Per pool: shards waiting, in flight and redelivered, and pulls waiting; "
        "each worker's last report (shards, tasks, dead-lettered, paused); the dead-letter "
        "count; the runs in progress with their owner and shards.",
    )
    s.add_argument(
        "--config", type=Path, metavar="FILE", help="evalsi.yaml (default: ./evalsi.yaml)"
    )
    s.add_argument("--format", choices=("table", "json"), default="table")
    s.set_defaults(handler=status_command)


def worker_command(args: argparse.Namespace) -> int:
    require_extra("evalsi worker", "cluster", "nats", "psycopg")
    from evalsi.server import load_config, run_worker

    path = args.config
    if path is None and Path(DEFAULT_CONFIG).is_file():
        path = Path(DEFAULT_CONFIG)
    config = load_config(path, no_auth=True)  # a worker listens on nothing
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stats = run_worker(config, args.pool, name=args.name, drain_s=args.drain)
    summary = {
        "shards": stats.shards,
        "tasks": stats.tasks,
        "skipped": stats.skipped,
        "dead": stats.dead,
        "failed": stats.failed,
        "paused_seconds": round(stats.paused_s, 3),
    }
    if args.format == "json":
        print_json(summary)
    else:
        note(", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def status_command(args: argparse.Namespace) -> int:
    require_extra("evalsi cluster status", "cluster", "nats", "psycopg")
    from evalsi.server import cluster_report, load_config

    path = args.config
    if path is None and Path(DEFAULT_CONFIG).is_file():
        path = Path(DEFAULT_CONFIG)
    report = cluster_report(load_config(path, no_auth=True))
    if args.format == "json":
        print_json(report)
        return 0
    print(f"NATS {report['nats']}; dead-lettered shards: {report['dead']}")
    for pool in report["pools"]:
        print(
            f"pool {pool['name']}: {pool['pending']} pending, {pool['in_flight']} in flight, "
            f"{pool['redelivered']} redelivered, {pool['waiting']} pulls waiting"
        )
    for w in report["workers"]:
        print(
            f"  worker {w['name']} ({w['pool']}): {w['shards']} shards, {w['tasks']} tasks, "
            f"{w['in_flight']} in flight, {w['dead']} dead, {w['failed']} failed, "
            f"paused {w['paused_seconds']}s, reported {w['age_seconds']}s ago"
        )
    if not report["workers"]:
        print("  no worker reported in the last 30 s")
    for run in report.get("runs", []):
        shards = ", ".join(f"{k} {v['shards']} ({v['tasks']} tasks)" for k, v in
                           sorted(run["shards"].items())) or "none queued"  # fmt: skip
        print(f"run {run['run_id']} (owner {run['owner'] or '?'}): {shards}")
    return 0

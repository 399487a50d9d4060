"""``evalsi watch -f policy.yaml``: apply an online evaluation policy to a server, then follow
what it grades.

The policy is checked by the server (exactly as it will run it: its evaluators, packs, judges
and secret rules); errors name the file's lines and fields and exit 2. ``--check`` checks the
file here instead, against the local evaluators, without a server. After applying, the
policy's counts and window aggregates are printed every ``--interval`` seconds until Ctrl-C
(``--once``: once, then exit).

Following survives the connection: a dropped connection, a server restarting or a slow answer
(``ServerUnavailable``) is retried after 0.5 s, doubling up to 10 s, with a note on stderr,
for as long as it takes. A keep-alive connection the server closes just as the next poll
reuses it fails that poll with "Connection reset by peer"; that alone ended a healthy watch
after a few minutes. Only the start fails fast (a server never reached is a wrong URL, not a
blip), and real errors still end it: the policy deleted (exit 2), access refused, bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from typing import Any

import orjson

from evalsi.cli._output import note, print_json, print_table
from evalsi.cli._remote import ENV, add_server_flag, project_of, server_of
from evalsi.core import UserError

DEFAULT_INTERVAL_S = 5.0
RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 10.0


def register(commands: Any) -> None:
    p = commands.add_parser(
        "watch",
        help="apply an online evaluation policy (OnlineEvalPolicy) and follow its scores",
        description="Apply an OnlineEvalPolicy to an evalsi server and print what it grades:\n"
        "counts, and per metric the window's n, mean and 95% interval.\n\n"
        "  evalsi watch -f policy.yaml --server http://127.0.0.1:8080          # follow\n"
        "  evalsi watch -f policy.yaml --server http://127.0.0.1:8080 --once   # apply, print\n"
        "  evalsi watch -f policy.yaml --check                                 # validate only\n\n"
        "Traces reach the server over OTLP (see docs/guides/watch.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-f", "--file", required=True, metavar="POLICY", help="the policy YAML file")
    p.add_argument("--once", action="store_true", help="apply, print the stats once, and exit")
    p.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help=f"seconds between two prints (default: {DEFAULT_INTERVAL_S:g})",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="only check the policy file against the local evaluators (no server)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(p)
    p.set_defaults(handler=watch)


def watch(args: argparse.Namespace) -> int:
    # Not just > 0: nan passes that, and asyncio.sleep(nan) or sleep(inf) never returns.
    if not (math.isfinite(args.interval) and args.interval > 0):
        raise UserError(
            f"--interval: expected a finite positive number of seconds, got {args.interval}"
        )
    if args.check:
        return _check(args)
    server = server_of(args)
    if server is None:
        raise UserError(
            "evalsi watch applies the policy to a server: give --server URL",
            hint=f"start one with `evalsi serve`, or set ${ENV}; `--check` checks the file "
            "without a server",
        )
    try:
        return asyncio.run(_follow(args, server))
    except KeyboardInterrupt:
        note("stopped watching; the policy stays applied on the server")
        return 0


def _check(args: argparse.Namespace) -> int:
    from evalsi.packs import builtin_registry
    from evalsi.policies import load_policy

    spec = load_policy(args.file, project=project_of(args), registry=builtin_registry())
    summary = {
        "name": spec.name,
        "project_id": spec.project,
        "spec_hash": spec.spec_hash,
        "cascade": [s.name for s in spec.cascade],
        "valid": True,
    }
    if args.format == "json":
        print_json(summary)
    else:
        note(f"{args.file}: policy {spec.name!r} (project {spec.project}) is valid")
    return 0


async def _follow(args: argparse.Namespace, server: str) -> int:
    from evalsi.client import AsyncClient, ServerUnavailable

    async with AsyncClient(server, project=project_of(args)) as client:
        applied = await client.apply_policy(args.file, project_id=project_of(args))
        if args.format != "json":
            what = "applied" if applied.changed else "already applied (unchanged)"
            note(
                f"policy {applied.name!r} {what} on {server} (project {applied.project_id}, "
                f"scores in run {applied.run_id})"
            )
        failures = 0
        while True:
            try:
                stats = await client.policy_stats(applied.name, project_id=applied.project_id)
            except ServerUnavailable as e:
                if args.once:
                    raise
                delay = reconnect_delay(failures)
                failures += 1
                note(f"connection lost ({_reason(e)}), reconnecting in {delay:g}s")
                await asyncio.sleep(delay)
                continue
            if failures:
                note(f"reconnected to {server} after {failures} failed attempt(s)")
                failures = 0
            data = {"policy": applied.to_dict(), "stats": stats.to_dict()}
            if args.format == "json":
                if args.once:
                    print_json(data)
                else:
                    sys.stdout.write(orjson.dumps(data).decode() + "\n")
                    sys.stdout.flush()
            else:
                _print_stats(data["stats"])
            if args.once:
                return 0
            await asyncio.sleep(args.interval)


def reconnect_delay(failures: int) -> float:
    """Seconds before the next attempt after ``failures`` failed ones in a row: 0.5, 1, 2, 4,
    8, then 10 for ever (a server back after a restart is found within 10 s)."""
    return min(RECONNECT_FIRST_S * 2.0 ** min(failures, 32), RECONNECT_MAX_S)


def _reason(error: Exception) -> str:
    """The end of the transport's message ("Connection reset by peer (os error 104)"): the
    whole chain names the URL and the request, which the note does not need every time."""
    message = getattr(error, "message", str(error))
    return message.rsplit(": ", 1)[-1].strip() or type(error).__name__


def _print_stats(stats: dict[str, Any]) -> None:
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(stats["skipped"].items())) or "0"
    forced = stats.get("forced_by_feedback", 0)
    print(
        f"{stats['name']}: selected {stats['selected']}, sampled {stats['sampled']}"
        + (f" ({forced} on feedback)" if forced else "")
        + ", "
        f"evaluated {stats['evaluated']}, skipped ({skipped}), errors {stats['errors']}, "
        f"alerts {stats['alerts_fired']}, promoted {stats['promoted']}"
        + (
            f", sent to sinks {stats['sink_sent']} ({stats['sink_failures']} failed)"
            if stats.get("sink_sent") or stats.get("sink_failures")
            else ""
        )
        + (f"; firing: {', '.join(stats['firing'])}" if stats["firing"] else "")
    )
    rows = [
        [
            m["evaluator"],
            m["metric"],
            str(m["n"]),
            _num(m["mean"]),
            f"[{_num(m['ci'][0])}, {_num(m['ci'][1])}]",
            str(m["skipped"]),
            str(m["errors"]),
        ]
        for m in stats["window"]
    ]
    window = f"last {stats['window_seconds']:g}s"
    if rows:
        print_table(
            ("evaluator", "metric", "n", "mean", "95% CI", "skipped", "errors"),
            rows,
            title=window,
        )
    else:
        print(f"{window}: nothing graded yet")
    sys.stdout.flush()


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"

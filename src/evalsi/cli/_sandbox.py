"""``evalsi sandbox``: which isolation rungs work here, and running one command confined."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from evalsi.cli._output import fail, note, print_json, print_table

if TYPE_CHECKING:
    from evalsi.sandbox import ExecResult, Level

EPILOG = """\
examples:
  evalsi sandbox probe
  evalsi sandbox probe --format json
  evalsi sandbox run -- python3 -c 'print(6 * 7)'
  evalsi sandbox run --timeout 5 --memory 256 --format json -- sh -c 'echo hi; exit 3'
  evalsi sandbox run --min-isolation none -- true

The ladder, strongest first: vm (firecracker) > kernel > namespaced (bwrap) > confined
(landlock) > none. `run` takes the strongest rung that works here and refuses to run at all
when it is weaker than --min-isolation (default: namespaced): nothing ever runs unconfined
unless you pass --min-isolation none. `probe` lists every rung and why it is unavailable.
"""

RUN_EPILOG = """\
examples:
  evalsi sandbox run -- python3 -c 'print(6 * 7)'
  evalsi sandbox run --timeout 5 --memory 256 --format json -- sh -c 'echo hi; exit 3'
  evalsi sandbox run --min-isolation none -- true

--format json prints {outcome, exit_code, stdout, stderr, duration_ms, isolation: {driver,
level, enforcement}} (stdout and stderr decoded as UTF-8, invalid bytes replaced) at the end;
the default streams the program's stdout and stderr through as they are written and adds one
summary line on stderr. The environment inside is empty but for PATH, HOME, LANG and each
--env KEY=VALUE.
Exit codes: the program's own where it ran (a signal N gives 128+N, a timeout 124, a resource
limit or a denial 137); 2 a bad flag; 3 no rung at or above --min-isolation works here
(SANDBOX_UNAVAILABLE, nothing ran) or the sandbox itself failed.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "sandbox",
        help="probe the isolation ladder, or run a command confined",
        description="Probe which sandbox rungs work on this machine, or run one command on the "
        "strongest rung available (never below --min-isolation).",
        epilog=EPILOG,
    )
    sub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    probe = sub.add_parser(
        "probe",
        help="each rung: driver, level, available, why not",
        description="Probe every rung of the ladder (its real profile against `true`).",
        epilog="examples:\n  evalsi sandbox probe\n  evalsi sandbox probe --format json\n",
    )
    probe.add_argument("--format", choices=("table", "json"), default="table")
    add_config_flag(probe)
    probe.set_defaults(handler=probe_command)

    r = sub.add_parser(
        "run",
        help="run one command on the strongest rung (fails closed)",
        description="Run CMD in a fresh sandbox with an empty workspace as its working "
        "directory, then remove the workspace.",
        epilog=RUN_EPILOG,
    )
    r.add_argument(
        "--min-isolation",
        type=_level,
        default="namespaced",
        metavar="LEVEL",
        help="the weakest rung accepted: vm, kernel, namespaced, confined, none "
        "(default: namespaced)",
    )
    r.add_argument("--timeout", type=_positive(float), metavar="S", help="wall clock, seconds")
    r.add_argument("--memory", type=_positive(int), metavar="MB", help="memory limit, MiB")
    r.add_argument("--network", choices=("deny", "loopback"), default="deny", help="default: deny")
    r.add_argument(
        "--env",
        type=_assignment,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable inside the sandbox (repeatable; the host's are never passed)",
    )
    r.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    add_config_flag(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...")
    r.set_defaults(handler=run_command)
    p.set_defaults(handler=lambda _args: _usage(p))


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="evalsi.yaml whose `sandbox` section (drivers, minIsolation, concurrency, "
        "firecracker) applies (default: ./evalsi.yaml when it exists)",
    )


def apply_config(path: str | None) -> None:
    """Install the ``sandbox`` section of ``path`` (or ./evalsi.yaml when present) for this
    process; without a file the defaults stand. A bad section is a SpecError (exit 2)."""
    from pathlib import Path

    file = Path(path) if path is not None else Path("evalsi.yaml")
    if path is None and not file.is_file():
        return
    from evalsi.sandbox import configure  # only with a file: the sandbox and config load slowly
    from evalsi.server import load_sandbox_config

    configure(load_sandbox_config(file))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _level(text: str) -> Level:
    from evalsi.sandbox import Level

    try:
        return Level.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or "\0" in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def probe_command(args: argparse.Namespace) -> int:
    from evalsi.sandbox import default_ladder

    apply_config(args.config)
    reports = default_ladder().probe_all()
    if args.format == "json":
        print_json({"rungs": [r.to_dict() for r in reports]})
        return 0
    rows = [
        (r.driver, str(r.level), "yes" if r.available else "no", r.reason or "-") for r in reports
    ]
    print_table(("driver", "level", "available", "why not"), rows, title="sandbox ladder")
    return 0


def run_command(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from evalsi.sandbox import SandboxSpec, run

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        return fail("sandbox run: no command given; put it after --, e.g. -- python3 -V", 2)
    apply_config(args.config)
    spec = SandboxSpec(min_isolation=args.min_isolation, network=args.network, env=dict(args.env))
    if args.timeout is not None:
        spec = replace(spec, timeout_seconds=args.timeout)
    if args.memory is not None:
        spec = replace(spec, resources=replace(spec.resources, memory_mb=args.memory))
    streamed = args.format == "text"
    # SandboxUnavailable → exit 3 through main
    result = run(cmd, spec, on_output=_passthrough if streamed else None)
    iso = result.isolation
    if args.format == "json":
        print_json(to_dict(result))
    if result.outcome.is_infra:
        return fail(f"sandbox runner failure ({iso.driver}): {result.outcome.detail}", 3)
    if streamed:
        note(
            f"sandbox: {describe(result)} · {iso.driver} ({iso.level}, {iso.enforcement}) · "
            f"{result.duration_ms:.0f} ms"
        )
    return exit_code(result)


def _passthrough(stream: str, chunk: bytes) -> None:
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.buffer.write(chunk)
    out.flush()


def describe(result: ExecResult) -> str:
    o = result.outcome
    if o.kind == "exit":
        return f"exit {o.code}"
    return f"{o.kind} ({o.detail})" if o.detail else o.kind


def exit_code(result: ExecResult) -> int:
    """The program's own exit code; signals as a shell reports them; 124 for a timeout."""
    o = result.outcome
    if o.kind == "exit" and o.code is not None:
        return o.code if o.code >= 0 else 128 - o.code
    if o.kind == "timeout":
        return 124
    return 128 + int(signal.SIGKILL)


def to_dict(result: ExecResult) -> dict[str, Any]:
    o = result.outcome
    return {
        "outcome": o.kind,
        "outcome_detail": o.detail,
        "exit_code": result.exit_code,
        "stdout": result.stdout.decode("utf-8", "replace"),
        "stderr": result.stderr.decode("utf-8", "replace"),
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": round(result.duration_ms, 3),
        "isolation": result.isolation.to_dict(),
    }

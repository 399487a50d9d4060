"""Sandbox cold start: ``true`` and ``python3 -c pass`` through evalsi's bwrap rung, through the
same bwrap command line run directly, and as a plain subprocess, in one run.

    python bench/sandbox_start.py            # median of 20 per side
    python bench/sandbox_start.py --runs 50 --check

- plain: ``subprocess.run(argv)`` with captured output.
- raw bwrap: the exact command line the driver builds (``BwrapDriver.command``), with the same
  seccomp filter and error pipe on fds 4 and 3, under the same pool uid, run by
  ``subprocess.run``: what any careful caller of bwrap pays.
- evalsi: ``BwrapDriver.exec`` (uid slot, workspace hand-over, capture, outcome), with its
  default per-execution memory cgroup (as root, where cgroups exist).
- rlimits only: the same with ``sandbox.cgroups: false``: what the launcher itself adds; the
  difference to the column before is the price of the memory cgroup (a cgroup v1 migration
  waits for an RCU grace period).

Targets (issue 7): evalsi adds at most 5 ms over raw bwrap; sandboxed ``python3 -c pass`` is
at most 25 ms over the plain subprocess; both checked for each mode. Results go to
``bench/out/sandbox_start.json``.
Needs root (the uid pool) and bubblewrap.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evalsi.sandbox import SandboxConfig, _seccomp, configure
from evalsi.sandbox._bwrap import BwrapDriver
from evalsi.sandbox._types import SandboxSpec

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
PROGRAMS = {"true": ["true"], "python3 -c pass": ["/usr/bin/python3", "-c", "pass"]}
OVER_RAW_MS = 5.0
OVER_PLAIN_MS = 25.0
POOL_UID = 2_000_000_000  # the driver's first uid slot


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm: page cache, the filter's compilation
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def raw_bwrap(cmd: list[str]) -> None:
    """The driver's command line with its fds in place, run directly."""
    # Park every descriptor above 100 first, so 3 and 4 are free for the dup2 below.
    seccomp, read, write = (_high(fd) for fd in (_seccomp.filter_fd("deny"), *os.pipe()))
    try:
        os.dup2(write, 3)
        os.dup2(seccomp, 4)
        subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            pass_fds=(3, 4),
            check=True,
            user=POOL_UID,
            group=POOL_UID,
            extra_groups=[],
        )
    finally:
        for fd in (3, 4, seccomp, read, write):
            os.close(fd)


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 100)
    os.close(fd)
    return moved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per side (median)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        print("needs bubblewrap and root (the driver's uid pool)", file=sys.stderr)
        return 2
    driver = BwrapDriver()
    spec = SandboxSpec()
    workspace = Path(tempfile.mkdtemp(prefix="evalsi-bench-", dir="/tmp"))
    rows = []
    try:
        driver.exec(spec, workspace, ["true"])  # hands the workspace to the pool uid
        for name, argv in PROGRAMS.items():
            assert driver.exec(spec, workspace, argv).exit_code == 0, name
            cmd = driver.command(spec, argv, workspace=str(workspace))
            plain = median_ms(
                lambda argv=argv: subprocess.run(
                    argv, stdin=subprocess.DEVNULL, capture_output=True, check=True
                ),
                args.runs,
            )
            raw = median_ms(lambda cmd=cmd: raw_bwrap(cmd), args.runs)
            ours = median_ms(lambda argv=argv: driver.exec(spec, workspace, argv), args.runs)
            configure(SandboxConfig(cgroups=False))
            try:
                bare = median_ms(lambda argv=argv: driver.exec(spec, workspace, argv), args.runs)
            finally:
                configure(None)
            rows.append(
                {
                    "program": name,
                    "plain_ms": plain,
                    "raw_bwrap_ms": raw,
                    "evalsi_ms": ours,
                    "evalsi_rlimits_only_ms": bare,
                }
            )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"median of {args.runs} runs")
    print(
        f"{'program':16} {'plain':>9} {'raw bwrap':>10} {'evalsi':>9} {'rlimits only':>13} "
        f"{'over raw':>17} {'over plain':>19}"
    )
    failed = []
    for r in rows:
        overs = []
        for mode, key in (("evalsi", "evalsi_ms"), ("rlimits only", "evalsi_rlimits_only_ms")):
            over_raw = r[key] - r["raw_bwrap_ms"]
            over_plain = r[key] - r["plain_ms"]
            overs.append((over_raw, over_plain))
            if over_raw > OVER_RAW_MS:
                failed.append(f"{mode} {r['program']}: {over_raw:.2f} ms over raw bwrap")
            if r["program"].startswith("python3") and over_plain > OVER_PLAIN_MS:
                failed.append(f"{mode} {r['program']}: {over_plain:.2f} ms over plain")
        print(
            f"{r['program']:16} {r['plain_ms']:7.2f}ms {r['raw_bwrap_ms']:8.2f}ms "
            f"{r['evalsi_ms']:7.2f}ms {r['evalsi_rlimits_only_ms']:11.2f}ms "
            f"{overs[0][0]:+7.2f}/{overs[1][0]:+6.2f}ms {overs[0][1]:+8.2f}/{overs[1][1]:+6.2f}ms"
        )
    print("MET   all targets" if not failed else "MISS  " + "; ".join(failed))
    OUT.mkdir(exist_ok=True)
    (OUT / "sandbox_start.json").write_text(json.dumps({"runs": args.runs, "rows": rows}, indent=2))
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

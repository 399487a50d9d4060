"""Inspect AI peer for the run-throughput benchmark: generate + exact() against the stub LLM.

Run with the peers' venv (see bench/peers/setup.sh), against a running stub
(``tests/support/stub_llm_server.py --port 0 --latency-ms 50``):

    bench/.peers/venv/bin/python bench/peers/inspect_run_peer.py --url URL --samples 2000
    bench/.peers/venv/bin/python bench/peers/inspect_run_peer.py --url URL --data FILE.jsonl

The data is what ``bench/run_throughput.py`` feeds evalsi: JSONL lines
``{"id": "s<i>", "input": "q<i>", "reference": "q<i>"}`` (``--samples N`` writes the same
records in memory). The stub echoes the prompt, so every sample must score 1.0.

The model is Inspect's OpenAI-compatible provider, ``openai-api/stub/stub``: the ``stub``
service reads ``STUB_BASE_URL`` (``URL/v1``) and ``STUB_API_KEY`` (a dummy), and sends
``model: "stub"`` to ``/v1/chat/completions`` (Chat Completions, no streaming). The eval
uses ``max_connections`` = ``max_samples`` = ``--concurrency`` (64), ``max_tokens`` 16 like
the bench, solver ``generate()``, scorer ``exact()``, display none, no retries on errors
(``fail_on_error``), the log written to a throw-away temp dir (``--no-log-samples`` drops
the per-sample records from it; Inspect's default keeps them, as evalsi persists every
sample's output and score).

Timed (``seconds``): the ``inspect_ai.eval()`` call only (task setup, the model calls,
scoring, metrics, writing the log). Not timed: interpreter start, imports, building the
Samples/Task, the temp-dir cleanup. Offline: the only network traffic is to ``--url``.

Prints ONE JSON line on stdout:
``{"peer": "inspect-ai", "version", "samples", "seconds", "samples_per_s", "concurrency",
"mean_exact", "log_samples"}``. Everything else goes to stderr. Exit 1 when the eval did
not succeed or not every sample scored 1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time


def make_records(samples: int) -> list[dict[str, str]]:
    """The records ``bench/run_throughput.py``'s ``write_data`` writes."""
    return [{"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}"} for i in range(samples)]


def read_records(path: str, limit: int | None) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(records) >= limit:
                break
            if line.strip():
                records.append(json.loads(line))
    return records


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the stub's base URL (http://127.0.0.1:PORT)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="JSONL file of {id,input,reference}")
    src.add_argument("--samples", type=int, help="generate N records like run_throughput.py")
    p.add_argument("--limit", type=int, default=None, help="with --data: the first N records")
    p.add_argument("--concurrency", type=int, default=64, help="max_connections / max_samples")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument(
        "--no-log-samples",
        dest="log_samples",
        action="store_false",
        help="leave per-sample records out of the log (Inspect's default writes them)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    records = (
        make_records(args.samples) if args.data is None else read_records(args.data, args.limit)
    )
    n = len(records)
    if n == 0:
        print("no samples", file=sys.stderr)
        return 1

    os.environ.setdefault("INSPECT_DISPLAY", "none")
    os.environ.setdefault("INSPECT_LOG_LEVEL", "warning")
    os.environ["STUB_BASE_URL"] = args.url.rstrip("/") + "/v1"
    os.environ.setdefault("STUB_API_KEY", "dummy")

    import inspect_ai
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import exact
    from inspect_ai.solver import generate

    task = Task(
        dataset=MemoryDataset(
            [Sample(id=r["id"], input=r["input"], target=r["reference"]) for r in records],
            name="run-bench",
        ),
        solver=generate(),
        scorer=exact(),
        name="run_bench",
    )

    log_dir = tempfile.mkdtemp(prefix="inspect-run-peer-logs-")
    try:
        t0 = time.perf_counter()
        logs = inspect_eval(
            task,
            model="openai-api/stub/stub",
            display="none",
            log_dir=log_dir,
            log_samples=args.log_samples,
            score_display=False,
            max_connections=args.concurrency,
            max_samples=args.concurrency,
            max_tokens=args.max_tokens,
            max_retries=0,
            ctl_server=False,
            fail_on_error=True,
        )
        seconds = time.perf_counter() - t0
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

    log = logs[0]
    if log.status != "success" or log.results is None:
        print(
            f"inspect eval did not succeed: status={log.status} error={log.error}", file=sys.stderr
        )
        return 1
    mean_exact = log.results.scores[0].metrics["mean"].value
    print(
        json.dumps(
            {
                "peer": "inspect-ai",
                "version": inspect_ai.__version__,
                "samples": n,
                "seconds": round(seconds, 6),
                "samples_per_s": round(n / seconds, 3),
                "concurrency": args.concurrency,
                "mean_exact": mean_exact,
                "log_samples": args.log_samples,
            }
        ),
        flush=True,
    )
    if mean_exact != 1.0:
        print(f"expected every sample to match, mean exact() = {mean_exact}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

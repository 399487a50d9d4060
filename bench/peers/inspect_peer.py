"""Inspect AI peer for the scoring-throughput benchmark (exact match + contains).

Run with the peers' venv (see bench/peers/setup.sh):

    bench/.peers/venv/bin/python bench/peers/inspect_peer.py --data FILE.jsonl --limit N
    bench/.peers/venv/bin/python bench/peers/inspect_peer.py --make-data N FILE.jsonl

Each JSONL line is ``{"id", "input", "output", "reference"}``: the outputs were
produced already, so nothing is generated. The records become Inspect ``Sample``s
(input, target=reference, the output kept in metadata); a solver puts the stored
output in ``state.output`` (as if the model had answered it) instead of calling
``generate``; the built-in scorers ``exact()`` and ``includes()`` score it. A model
is required by ``eval()``, so the built-in ``mockllm/model`` is passed; it is never
called.

Prints ONE JSON line on stdout:
``{"peer": "inspect-ai", "version", "records", "seconds", "records_per_s", "mean_exact",
"mean_contains", "expected_exact", "expected_contains", "agrees_with_plain",
"log_samples", "max_samples"}``. Everything else goes to stderr.

Timed (``seconds``): building the Samples / MemoryDataset / Task from the records
already read from the file, and the whole ``inspect_ai.eval()`` call (task setup,
running the solver and both scorers over every sample, metrics, writing the eval
log to a throw-away temp dir). Not timed: interpreter start, imports, reading and
JSON-parsing the input file, the temp-dir cleanup.

Semantics versus evalsi (``output.strip() == reference.strip()`` and
``reference.strip() in output.strip()``): Inspect's ``exact()`` compares *normalized*
text (casefold, drop punctuation and articles, collapse whitespace), so it also
counts e.g. ``paris`` == ``Paris`` as a match; ``includes()`` is made case-sensitive
here (``ignore_case=False``) like a plain ``in``. The script computes the plain
evalsi-style means too (``expected_exact`` / ``expected_contains``) and sets
``agrees_with_plain``; on disagreement it warns on stderr (exit 0, or exit 2 with
``--strict``). The ``--make-data`` records never differ only by case/punctuation,
so there they must agree.

Logging: ``--log-samples`` keeps Inspect's default of writing every sample (with
its events and scores) into the log; by default it is off (``log_samples=False``),
i.e. logging minimized as far as ``eval()`` allows -- a log file is always written,
so it goes to a temp dir that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

_WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
)


def make_data(n: int, path: str | os.PathLike[str], seed: int = 1234) -> dict[str, int]:
    """Write ``n`` deterministic records to ``path`` (JSONL); stdlib only.

    Mix: ~50% output == reference, ~25% output contains the reference inside a
    sentence (contains but not exact), ~25% a different answer (neither). Answers
    differ in words/digits, never only in case or punctuation, so normalizing
    exact matchers (Inspect's ``exact()``, DeepEval's strip) agree with ``==``.
    Also used by deepeval_peer.py so both peers see identical data.
    """
    rng = random.Random(seed)
    counts = {"records": n, "exact": 0, "contains": 0}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            a, b = rng.sample(_WORDS, 2)
            reference = f"{a} {rng.randrange(1000)} {b}"
            roll = rng.random()
            if roll < 0.5:
                output = reference
            elif roll < 0.75:
                output = f"I believe it is {reference} for sure"
            else:
                c, d = rng.sample([w for w in _WORDS if w not in (a, b)], 2)
                output = f"{c} {rng.randrange(1000, 2000)} {d}"
            counts["exact"] += output == reference
            counts["contains"] += reference in output
            rec = {
                "id": f"r{i:07d}",
                "input": f"Question {i}: name the code for item {a}-{i % 97}?",
                "output": output,
                "reference": reference,
            }
            f.write(json.dumps(rec) + "\n")
    return counts


def read_records(path: str, limit: int | None) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(records) >= limit:
                break
            if line.strip():
                records.append(json.loads(line))
    return records


def plain_counts(records: list[dict[str, str]]) -> tuple[int, int]:
    """evalsi-style exact-match and contains counts (both sides stripped)."""
    exact = contains = 0
    for r in records:
        out, ref = r["output"].strip(), r["reference"].strip()
        exact += out == ref
        contains += ref in out
    return exact, contains


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="JSONL file of {id,input,output,reference}")
    p.add_argument("--limit", type=int, default=None, help="score the first N records")
    p.add_argument("--make-data", nargs=2, metavar=("N", "FILE"), help="write N records and exit")
    p.add_argument(
        "--max-samples",
        type=int,
        default=10,
        help=(
            "samples run concurrently within the task (Inspect's max_samples). Default 10 ="
            " what Inspect picks itself for mockllm (max_connections 10); higher only adds"
            " scheduling overhead here since nothing waits on I/O (100: -10%% records/s)"
        ),
    )
    p.add_argument(
        "--log-samples",
        action="store_true",
        help="log every sample (Inspect's default); off by default to minimize logging",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 when the framework's means differ from plain exact/contains",
    )
    args = p.parse_args(argv)
    if not args.make_data and not args.data:
        p.error("--data (or --make-data) is required")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.make_data:
        counts = make_data(int(args.make_data[0]), args.make_data[1])
        print(json.dumps({"wrote": args.make_data[1], **counts}))
        return 0

    # No task display, warnings-only logging (eval() also gets display="none" and no
    # control socket below). Offline as is: strace shows no connect(); Inspect only
    # runs `git rev-parse --short HEAD` in the cwd to stamp the log with a revision.
    os.environ.setdefault("INSPECT_DISPLAY", "none")
    os.environ.setdefault("INSPECT_LOG_LEVEL", "warning")

    import inspect_ai
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import exact, includes
    from inspect_ai.solver import Generate, TaskState, solver

    @solver
    def replay_output():  # type: ignore[no-untyped-def]
        """Use the record's stored output as the model's answer (no generate call)."""

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.output = ModelOutput.from_content(
                model="mockllm/model", content=state.metadata["output"]
            )
            state.messages.append(state.output.message)
            return state

        return solve

    records = read_records(args.data, args.limit)
    n = len(records)
    expected_exact, expected_contains = plain_counts(records)

    log_dir = tempfile.mkdtemp(prefix="inspect-peer-logs-")
    try:
        t0 = time.perf_counter()
        dataset = MemoryDataset(
            [
                Sample(
                    id=r["id"],
                    input=r["input"],
                    target=r["reference"],
                    metadata={"output": r["output"]},
                )
                for r in records
            ],
            name="peer-bench",
        )
        task = Task(
            dataset=dataset,
            solver=replay_output(),
            scorer=[exact(), includes(ignore_case=False)],
            name="peer_bench",
        )
        logs = inspect_eval(
            task,
            model="mockllm/model",
            display="none",
            log_dir=log_dir,
            log_samples=args.log_samples,
            log_realtime=False,
            score_display=False,
            max_samples=args.max_samples,
            ctl_server=False,
            fail_on_error=True,
        )
        seconds = time.perf_counter() - t0
    finally:
        import shutil

        shutil.rmtree(log_dir, ignore_errors=True)

    log = logs[0]
    if log.status != "success" or log.results is None:
        print(
            f"inspect eval did not succeed: status={log.status} error={log.error}", file=sys.stderr
        )
        return 1
    by_scorer = {s.name: s for s in log.results.scores}
    mean_exact = by_scorer["exact"].metrics["mean"].value
    mean_contains = by_scorer["includes"].metrics["accuracy"].value

    agrees = n > 0 and abs(mean_exact * n - expected_exact) < 1e-6 * n
    agrees = agrees and abs(mean_contains * n - expected_contains) < 1e-6 * n
    print(
        json.dumps(
            {
                "peer": "inspect-ai",
                "version": inspect_ai.__version__,
                "records": n,
                "seconds": round(seconds, 6),
                "records_per_s": round(n / seconds, 3) if seconds > 0 else None,
                "mean_exact": mean_exact,
                "mean_contains": mean_contains,
                "expected_exact": expected_exact / n if n else None,
                "expected_contains": expected_contains / n if n else None,
                "agrees_with_plain": agrees,
                "log_samples": args.log_samples,
                "max_samples": args.max_samples,
            }
        ),
        flush=True,
    )
    if not agrees:
        print(
            f"warning: inspect exact()={mean_exact * n:.0f} includes()={mean_contains * n:.0f}"
            f" vs plain exact={expected_exact} contains={expected_contains} of {n}"
            " (exact() normalizes case/punctuation/articles)",
            file=sys.stderr,
        )
        return 2 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

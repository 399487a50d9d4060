"""DeepEval peer for the scoring-throughput benchmark (exact match + contains).

Run with the peers' venv (see bench/peers/setup.sh):

    bench/.peers/venv/bin/python bench/peers/deepeval_peer.py --data FILE.jsonl --limit N
    bench/.peers/venv/bin/python bench/peers/deepeval_peer.py --make-data N FILE.jsonl

Each JSONL line is ``{"id", "input", "output", "reference"}`` and becomes an
``LLMTestCase(input, actual_output=output, expected_output=reference)``.

Metrics: DeepEval's own deterministic ``deepeval.metrics.ExactMatchMetric``
(``actual.strip() == expected.strip()``, no LLM). DeepEval has no built-in
"contains" metric (``PatternMatchMetric`` takes one fixed regex per metric, not a
per-test-case reference), so ``ContainsMetric`` below is a minimal ``BaseMetric``
subclass written the same way as ``ExactMatchMetric`` (``expected.strip() in
actual.strip()``). Both then agree with evalsi's exact-match / contains.

Path measured (``--mode``):
  * ``evaluate`` (default) -- ``deepeval.evaluate(test_cases, metrics)``, the
    framework's documented entry point for a batch of test cases, with its default
    async execution (``AsyncConfig()``: run_async, max_concurrent=20). Console
    output is turned off (no progress indicator, no per-case results table), and
    so is ``CacheConfig.write_cache`` (DeepEval's default is on): with it, every
    finished test case re-serializes the whole cache JSON and the whole test-run
    JSON to disk, which is quadratic -- 1,000 records take ~75-85 s (~12-14
    records/s) and 10,000 would take hours. ``--write-cache`` restores it. The run
    still builds DeepEval's test run and writes its local run snapshot at the end
    (to a temp dir, see below).
  * ``measure`` -- a plain loop of ``metric.measure(test_case)``, the lowest-overhead
    way to use the metrics (no test run, no cache, no files).

Timed (``seconds``): building the LLMTestCases and metrics from the records already
read from the file, and the whole ``evaluate()`` call / measure loop, plus reading
the scores back. Not timed: interpreter start, imports, reading and JSON-parsing
the input file.

Offline: telemetry off (``DEEPEVAL_TELEMETRY_OPT_OUT=YES``), no Confident AI
upload (any ``CONFIDENT_API_KEY``/``API_KEY`` in the environment is dropped, legacy
key file and ``.env`` autoloading disabled), no update check, no post-run
"inspect" prompt. DeepEval creates its ``.deepeval`` folder (cache, run snapshot)
in the cwd as soon as it is imported, unless ``DEEPEVAL_CACHE_FOLDER`` is set
before the import: here it points at a temp dir that is removed afterwards, so
nothing lands in the caller's working directory. DeepEval prints to stdout
through rich; fd 1 is redirected to stderr while it runs so that stdout carries
only the single JSON result line.

Prints ONE JSON line on stdout:
``{"peer": "deepeval", "version", "records", "seconds", "records_per_s", "mean_exact",
"mean_contains", "expected_exact", "expected_contains", "agrees_with_plain", "mode",
"write_cache"}``. ``agrees_with_plain`` compares with a plain evalsi-style
``out.strip() == ref.strip()`` / ``ref.strip() in out.strip()`` count; a
disagreement (or a test case left unscored) is reported on stderr and exits 2 with
``--strict`` (0 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
# stdlib-only helpers shared with the Inspect peer (same generator, same plain counts)
from inspect_peer import make_data, plain_counts, read_records

_OFFLINE_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_DISABLE_LEGACY_KEYFILE": "1",
    "DEEPEVAL_NO_INSPECT_PROMPT": "1",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_GRPC_LOGGING": "0",
    "ERROR_REPORTING": "NO",
}
_DROP_ENV = ("CONFIDENT_API_KEY", "API_KEY", "DEEPEVAL_RESULTS_FOLDER", "OPENAI_API_KEY")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="JSONL file of {id,input,output,reference}")
    p.add_argument("--limit", type=int, default=None, help="score the first N records")
    p.add_argument("--make-data", nargs=2, metavar=("N", "FILE"), help="write N records and exit")
    p.add_argument(
        "--mode",
        choices=("evaluate", "measure"),
        default="evaluate",
        help="deepeval.evaluate() (default, the framework's batch path) or a metric.measure() loop",
    )
    p.add_argument(
        "--write-cache",
        action="store_true",
        help=(
            "evaluate mode: keep DeepEval's default CacheConfig(write_cache=True), which rewrites"
            " the whole cache and test-run JSON files after EVERY test case (quadratic)"
        ),
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

    work_dir = tempfile.mkdtemp(prefix="deepeval-peer-")
    os.environ.update(_OFFLINE_ENV)
    for k in _DROP_ENV:
        os.environ.pop(k, None)
    os.environ["DEEPEVAL_CACHE_FOLDER"] = os.path.join(work_dir, ".deepeval")
    os.environ["DEEPEVAL_HOME"] = work_dir

    # Keep the real stdout for the result line; everything DeepEval prints goes to stderr.
    sys.stdout.flush()
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    try:
        return _run(args, result_out)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _run(args: argparse.Namespace, result_out: TextIO) -> int:
    import importlib.metadata

    from deepeval.evaluate import AsyncConfig, CacheConfig, DisplayConfig, evaluate
    from deepeval.metrics import BaseMetric, ExactMatchMetric
    from deepeval.metrics.utils import check_llm_test_case_params
    from deepeval.test_case import LLMTestCase, SingleTurnParams

    class ContainsMetric(BaseMetric):
        """1.0 when the stripped expected output occurs in the stripped actual output."""

        # same required fields and same validation call as ExactMatchMetric.measure
        _required_params = (
            SingleTurnParams.INPUT,
            SingleTurnParams.ACTUAL_OUTPUT,
            SingleTurnParams.EXPECTED_OUTPUT,
        )

        def __init__(self, threshold: float = 1.0) -> None:
            self.threshold = threshold
            self.verbose_mode = False
            self.flaky = False

        def measure(self, test_case: LLMTestCase, *args: object, **kwargs: object) -> float:
            check_llm_test_case_params(
                test_case, list(self._required_params), None, None, self, None, test_case.multimodal
            )
            expected = (test_case.expected_output or "").strip()
            self.score = 1.0 if expected in (test_case.actual_output or "").strip() else 0.0
            self.reason = None
            self.success = self.is_successful()
            return self.score

        async def a_measure(self, test_case: LLMTestCase, *args: object, **kwargs: object) -> float:
            return self.measure(test_case)

        @property
        def __name__(self) -> str:
            return "Contains"

    records = read_records(args.data, args.limit)
    n = len(records)
    expected_exact, expected_contains = plain_counts(records)

    t0 = time.perf_counter()
    cases = [
        LLMTestCase(
            name=r["id"],
            input=r["input"],
            actual_output=r["output"],
            expected_output=r["reference"],
        )
        for r in records
    ]
    if args.mode == "evaluate":
        result = evaluate(
            test_cases=cases,
            metrics=[ExactMatchMetric(), ContainsMetric()],
            async_config=AsyncConfig(),
            cache_config=CacheConfig(write_cache=args.write_cache),
            display_config=DisplayConfig(
                show_indicator=False, print_results=False, inspect_after_run=False
            ),
        )
        exact_sum = contains_sum = 0.0
        scored = 0
        for tr in result.test_results:
            for md in tr.metrics_data or []:
                if md.name == "Exact Match":
                    exact_sum += md.score or 0.0
                    scored += 1
                elif md.name == "Contains":
                    contains_sum += md.score or 0.0
    else:
        em, cm = ExactMatchMetric(), ContainsMetric()
        exact_sum = contains_sum = 0.0
        for tc in cases:
            exact_sum += em.measure(tc, _show_indicator=False)
            contains_sum += cm.measure(tc)
        scored = n
    seconds = time.perf_counter() - t0

    mean_exact = exact_sum / n if n else 0.0
    mean_contains = contains_sum / n if n else 0.0
    agrees = n > 0 and scored == n and exact_sum == expected_exact
    agrees = agrees and contains_sum == expected_contains
    print(
        json.dumps(
            {
                "peer": "deepeval",
                "version": importlib.metadata.version("deepeval"),
                "records": n,
                "seconds": round(seconds, 6),
                "records_per_s": round(n / seconds, 3) if seconds > 0 else None,
                "mean_exact": mean_exact,
                "mean_contains": mean_contains,
                "expected_exact": expected_exact / n if n else None,
                "expected_contains": expected_contains / n if n else None,
                "agrees_with_plain": agrees,
                "mode": args.mode,
                "write_cache": args.write_cache if args.mode == "evaluate" else None,
            }
        ),
        file=result_out,
        flush=True,
    )
    if not agrees:
        print(
            f"warning: deepeval scored={scored} exact={exact_sum:.0f} contains={contains_sum:.0f}"
            f" vs plain records={n} exact={expected_exact} contains={expected_contains}",
            file=sys.stderr,
        )
        return 2 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

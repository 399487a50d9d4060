"""``evalsi eval``: the Score way in from the command line."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from evalsi.cli._evaluators import code_registry
from evalsi.cli._output import (
    FORMATS,
    add_failures_flag,
    note,
    print_json,
    print_result,
    with_failures,
)
from evalsi.cli._remote import add_server_flag, connect, refuse_local_flags, server_of
from evalsi.cli._sandbox import apply_config as apply_sandbox_config
from evalsi.cli._warnings import print_warnings, result_warnings
from evalsi.core import ParamError, UserError

EPILOG = """\
examples:
  evalsi eval --data qa.jsonl --evaluators exact-match
  evalsi eval --data qa.jsonl --evaluators exact-match,contains \\
      --param exact-match.ignore_case=true --format json
  evalsi eval --data chats.csv --output-field answer --reference-field gold \\
      --evaluators fuzzy-match --cluster-by topic
  evalsi eval --data hf://acme/qa@test --evaluators exact-match --on-bad-record skip
  evalsi eval --data qa.jsonl --evaluators exact-match,cost \\
      --gate "metric('exact-match').ci.low >= 0.8" --gate "metric('cost').mean <= 0.25"

Each row is one record: input, output, reference (a JSON list means "any of these"), id,
context, usage {input_tokens, output_tokens, cost_usd, latency_ms}, metadata; other keys become
metadata. Results are stored in .evalsi/evalsi.db (see `evalsi runs list`).
Judge-pack evaluators (llm-judge, g-eval, pairwise, reference-correctness) need --judges FILE,
a YAML mapping such as `default: {connector: openai-compatible, baseUrl: URL, model: NAME}`.
A gate is a CEL condition on the metrics: metric('EVALUATOR') or metric('EVALUATOR', 'METRIC')
with .mean .std .n .scored .skipped .errors .ci.low .ci.high .passAtK(k) .passHatK(k). A gate
whose metrics have too little eligible data (see --min-completion-rate, --max-error-rate) is
inconclusive, never failed.
With --server URL (or $EVALSI_SERVER) the data is read here and graded by that evalsi
server, which stores the run (named --name) and evaluates the gates; the output is the same.
--store and --judges are the server's (its evalsi.yaml) and cannot be given with --server.
Exit codes: 0 done and every gate passed; 1 a gate failed; 2 bad input, a bad gate, or an
inconclusive gate (and none failed); 3 could not finish (or the server cannot be reached).
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "eval",
        help="grade records that already hold outputs (Score)",
        description="Grade a dataset whose records already hold outputs, with a 95% interval "
        "on every metric.",
        epilog=EPILOG,
    )
    p.add_argument(
        "--data", required=True, help="a .jsonl/.json/.csv/.parquet file or hf://OWNER/NAME[@SPLIT]"
    )
    p.add_argument(
        "--evaluators",
        required=True,
        help="comma-separated evaluator names or refs (see `evalsi catalog list`), or code: "
        "FILE.py:NAME or MODULE:NAME (an @evaluator; a plain function is wrapped)",
    )
    add_param_flag(p)
    p.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default: table)"
    )
    p.add_argument("--cluster-by", metavar="KEY", help="metadata key for clustered intervals")
    p.add_argument(
        "--bootstrap",
        choices=("percentile", "bca"),
        help="bootstrap intervals instead of Wilson / t",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for resampling (default: 0)")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument(
        "--on-bad-record",
        choices=("fail", "skip"),
        default="fail",
        help="stop at a malformed row (default) or count it and go on",
    )
    p.add_argument("--input-field", metavar="FIELD", help="row field holding the input")
    p.add_argument("--output-field", metavar="FIELD", help="row field holding the output")
    p.add_argument("--reference-field", metavar="FIELD", help="row field holding the reference")
    p.add_argument("--id-field", metavar="FIELD", help="row field holding the record id")
    p.add_argument("--name", default="", help="a label for this run")
    p.add_argument(
        "--judges",
        metavar="FILE",
        help="a YAML mapping of judge name -> {connector, baseUrl, model, params, secretRef} "
        "for the judge pack (llm-judge, g-eval, ...); there is no default judge",
    )
    add_no_cache_flag(p)
    add_failures_flag(p)
    p.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="EXPR",
        help="a CEL condition the run must meet, repeatable: "
        "--gate \"metric('exact-match').mean >= 0.8\"",
    )
    p.add_argument(
        "--min-completion-rate",
        type=float,
        default=0.8,
        metavar="RATE",
        help="a gate is inconclusive when fewer of its metric's records were scored (default: 0.8)",
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=0.1,
        metavar="RATE",
        help="a gate is inconclusive when its evaluator errored on more (default: 0.1)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_evidence_flags(p)
    add_server_flag(p)
    p.set_defaults(handler=run)


def add_evidence_flags(p: argparse.ArgumentParser) -> None:
    """``--declaration`` and ``--bundle``, shared by eval and run."""
    p.add_argument(
        "--declaration",
        metavar="FILE",
        help="a SystemDeclaration (the system under test, its tools, intended use, thresholds): "
        "the run registers a test plan a gate can judge (docs/guides/evidence.md)",
    )
    p.add_argument(
        "--bundle",
        metavar="DIR",
        help="seal the finished run into an evidence bundle in DIR (new or empty); the same as "
        "`evalsi bundle RUN -o DIR` afterwards",
    )


def check_bundle_dir(path: str | None) -> None:
    """``--bundle DIR`` must be new or empty: checked before the run, not after it."""
    if path is not None:
        from evalsi.evidence import check_output

        check_output(path)


def write_bundle_after(args: argparse.Namespace, server: str | None, run_id: str) -> None:
    """``--bundle DIR``: the finished run sealed into DIR (from the server's store with
    ``--server``); where it went, on stderr."""
    if not args.bundle or not run_id:
        return
    if server is not None:
        with connect(server, args) as client:
            written = client.export_bundle(run_id, args.bundle)
    else:
        from evalsi.cli._evidence import write_local

        written = write_local(args.store, run_id, args.bundle)
    note(f"bundle written to {written.path} ({written.files} files)")


def parse_params(items: list[str]) -> dict[str, dict[str, str]]:
    """``exact-match.ignore_case=true`` → ``{"exact-match": {"ignore_case": "true"}}``."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        evaluator, dot, param = key.rpartition(".")
        if not sep or not dot or not evaluator or not param:
            raise ParamError(
                f"--param {item!r}: expected EVALUATOR.KEY=VALUE",
                hint="for example --param exact-match.ignore_case=true",
            )
        out.setdefault(evaluator.strip(), {})[param.strip()] = value
    return out


def run(args: argparse.Namespace) -> int:
    from evalsi._api import evaluate
    from evalsi.datasets import FieldMap
    from evalsi.runs import ScoreResult

    names = evaluator_list(args.evaluators)
    overrides = {
        "input": args.input_field,
        "output": args.output_field,
        "reference": args.reference_field,
        "id": args.id_field,
    }
    fields = FieldMap(**{k: v for k, v in overrides.items() if v})
    options: dict[str, Any] = {
        "params": parse_params(args.param),
        "fields": fields,
        "cluster_by": args.cluster_by,
        "bootstrap": args.bootstrap,
        "seed": args.seed,
        "on_bad_record": args.on_bad_record,
        "gates": args.gate,
        "min_completion_rate": args.min_completion_rate,
        "max_evaluator_error_rate": args.max_error_rate,
    }
    server = grading_server(args, judges="the server's judges are configured in its evalsi.yaml")
    registry = code_registry(names, where="--evaluators", server=server)
    check_bundle_dir(args.bundle)
    if args.declaration:
        from evalsi.specs import load_declaration

        options["declaration"] = load_declaration(args.declaration)
    result: ScoreResult
    with progress_line(args.quiet) as progress:
        if server is not None:
            with connect(server, args) as client:
                result = client.evaluate(
                    args.data, names, name=args.name, progress=progress, **options
                )
        else:
            result = evaluate(
                args.data,
                names,
                store=args.store,
                name=args.name,
                progress=progress,
                registry=registry,
                judges=judges_of(args),
                **options,
            )
    warnings = result_warnings(result)
    print_warnings(warnings)
    write_bundle_after(args, server, result.run_id)
    if args.format == "json":
        data = result.to_dict()
        data["warnings"] = [dict(w) for w in warnings]
        print_json(with_failures(data, result, args.show_failures))
        return result.exit_code
    title = f"run {result.run_id} · {result.records} records · dataset {result.dataset_version}"
    print_result(args.format, title, result, args.show_failures)
    return result.exit_code


def evaluator_list(text: str) -> list[str]:
    """``--evaluators``: comma-separated, at least one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--evaluators is empty", hint="name at least one, e.g. exact-match")
    return names


def add_param_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="EVALUATOR.KEY=VALUE",
        help="an evaluator param, repeatable: --param exact-match.ignore_case=true",
    )


def grading_server(args: argparse.Namespace, **refused: str) -> str | None:
    """The server to grade on, refusing ``--store``, ``--no-cache`` and ``refused`` (flags
    that only work here); without one, ./evalsi.yaml's sandbox section is applied (for code
    evaluators)."""
    server = server_of(args)
    if server is None:
        apply_sandbox_config(None)
        return None
    judges = "the server's judges are configured in its evalsi.yaml (cache: false)"
    refuse_local_flags(args, server, store="the server stores the run", **refused, no_cache=judges)
    return server


def add_no_cache_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="ask the judges every time: neither read nor write the judge cache",
    )


def judges_of(args: argparse.Namespace) -> Mapping[str, Any] | None:
    """The ``--judges`` file's judges, with the cache off under ``--no-cache``."""
    judges = read_judges(args.judges) if args.judges else None
    if not args.no_cache:
        return judges
    from evalsi.runs import without_cache

    return without_cache(judges)


def read_judges(path: str) -> dict[str, Any]:
    """The ``--judges`` file: a YAML mapping; its entries are checked like a spec's judges."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise UserError(f"--judges {path}: cannot read it: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise UserError(f"--judges {path}: not valid YAML: {e}") from e
    if not isinstance(data, dict) or not data:
        raise UserError(
            f"--judges {path}: expected a mapping of judge name -> settings",
            hint="default: {connector: openai-compatible, baseUrl: http://..., model: NAME}",
        )
    return data


@contextlib.contextmanager
def progress_line(quiet: bool, **kinds: str) -> Iterator[ProgressLine | None]:
    """A ``ProgressLine`` (``kinds``: its ``unit`` and ``trouble``) closed after use; None
    when ``quiet``."""
    if quiet:
        yield None
        return
    line = ProgressLine(**kinds)
    try:
        yield line
    finally:
        line.close()


class ProgressLine:
    """Progress on stderr: a rich live bar on a terminal, one summary line per 10 s otherwise
    (so CI logs stay short). The bar pulses: streamed sources rarely know their size up front,
    and the text carries the ETA when they do."""

    def __init__(self, unit: str = "records", trouble: str = "bad") -> None:
        self.unit = unit
        self.trouble = trouble  # what the second count passed in is
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last = 0.0
        self._write: Callable[[str], Any] = sys.stderr.write
        self._bar: Any = None
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

            self._bar = Progress(
                SpinnerColumn(),
                BarColumn(bar_width=24),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("starting", total=None)
            self._bar.start()

    def __call__(self, done: int, bad: int, extra: str = "") -> None:
        now = time.monotonic()
        interval = 0.2 if self.tty else 10.0
        if now - self.last < interval:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        text = f"{done:,} {self.unit} done ({rate:,.0f}/s)"
        if bad:
            text += f", {bad} {self.trouble}"
        if extra:
            text += f", {extra}"
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        elif now - self.started >= interval:
            self._write(text + "\n")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()

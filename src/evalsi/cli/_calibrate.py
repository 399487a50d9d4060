"""``evalsi calibrate``: how far a judge evaluator agrees with human labels."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from evalsi.cli._eval import progress_line, read_judges
from evalsi.cli._output import FORMATS, note, print_json, print_markdown, print_table
from evalsi.core import ParamError

if TYPE_CHECKING:
    from evalsi.runs import CalibrationResult

EPILOG = """\
examples:
  evalsi calibrate --judge reference-correctness --labels labels.jsonl --judges judges.yaml
  evalsi calibrate --judge llm-judge --param rubric="Is the answer helpful?" \\
      --param scale=[1,2,3,4,5] --labels ratings.jsonl --judges judges.yaml --format json
  evalsi calibrate --judge pairwise --labels preferences.jsonl --judges judges.yaml

The labels file is a dataset (JSONL, JSON, CSV, Parquet) whose records carry the humans'
verdict: "label" (one rater: true/false, a string, or a number) or "labels" ({"rater": value},
several raters; null = not rated). The judge grades every record (answers are cached in the
store); its scores are compared with the labels: accuracy and Cohen's kappa for pass/fail or
labels, Pearson, Spearman and MAE for numbers (on the judge's own scale: llm-judge's `scale`,
g-eval's 1-5), Krippendorff's alpha with several raters; position bias for pairwise (each pair
is asked in both orders); length bias (correlation of the score with the output's length,
beside the humans'). The calibration is stored under the judge's identity, the evaluator, its
prompt template and its params: a report of a run whose gate reads an uncalibrated judge warns.
Exit codes: 0 done; 2 bad input, or no record could be compared; 3 the judge could not be
reached for any record.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "calibrate",
        help="measure a judge evaluator's agreement with human labels",
        description="Run a judge evaluator on human-labelled records and report its agreement "
        "with the humans, its position bias and its length bias, with 95% intervals.",
        epilog=EPILOG,
    )
    p.add_argument(
        "--judge",
        required=True,
        metavar="EVALUATOR",
        help="the judge evaluator: llm-judge, g-eval, reference-correctness, pairwise, ...",
    )
    p.add_argument("--labels", required=True, metavar="PATH", help="the human-labelled records")
    p.add_argument(
        "--judges",
        metavar="FILE",
        help="a YAML mapping of judge name -> {connector, baseUrl, model, params, secretRef}",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an evaluator param, repeatable: --param rubric=... (EVALUATOR.KEY=VALUE works too)",
    )
    p.add_argument(
        "--metric",
        help="which of the evaluator's metrics to compare (default: its own), e.g. "
        "llm-judge-passed for pass/fail labels",
    )
    p.add_argument(
        "--level",
        choices=("nominal", "ordinal", "interval", "ratio"),
        help="Krippendorff's alpha level for numeric labels (default: interval; labels and "
        "pass/fail are nominal)",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="default: table")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument("--name", default="", help="a label for the judge's run")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=calibrate)


def evaluator_params(items: list[str], evaluator: str) -> dict[str, str]:
    """``rubric=...`` or ``llm-judge.rubric=...`` → ``{"rubric": ...}``."""
    out: dict[str, str] = {}
    owners = {evaluator, evaluator.split("@", 1)[0].rsplit("/", 1)[-1]}
    for item in items:
        key, sep, value = item.partition("=")
        owner, dot, param = key.rpartition(".")
        name = param.strip() if dot else key.strip()
        if not sep or not name or (dot and owner.strip() not in owners):
            raise ParamError(
                f"--param {item!r}: expected KEY=VALUE (or {evaluator}.KEY=VALUE)",
                hint="for example --param rubric='Is the answer correct?'",
            )
        out[name] = value
    return out


def calibrate(args: argparse.Namespace) -> int:
    import asyncio

    from evalsi.packs import builtin_registry
    from evalsi.runs import calibrate_async

    with progress_line(args.quiet) as progress:
        result = asyncio.run(
            calibrate_async(
                args.labels,
                args.judge,
                params=evaluator_params(args.param, args.judge) if args.param else None,
                judges=read_judges(args.judges) if args.judges else None,
                metric=args.metric,
                level=args.level,
                store=args.store,
                registry=builtin_registry(),
                seed=args.seed,
                name=args.name,
                progress=progress,
            )
        )
    for warning in result.warnings:
        note(f"warning: {warning}")
    if args.format == "json":
        print_json(result.to_dict())
        return result.exit_code
    printer = print_markdown if args.format == "md" else print_table
    title = _title(result)
    printer(("statistic", "value", "95% CI", "n", "note"), rows(result), title=title)
    return result.exit_code


def _title(result: CalibrationResult) -> str:
    judge = result.judge.get("identity") or {}
    model = judge.get("model") if isinstance(judge, dict) else None
    stored = f" · stored as {result.calibration_id}" if result.calibration_id else ""
    return (
        f"calibration of {result.evaluator['name']} ({result.metric}) · judge "
        f"{result.judge.get('name')}{f' ({model})' if model else ''} · "
        f"{result.counts['compared']}/{result.counts['records']} records · run {result.run_id}"
        f"{stored}"
    )


Row = tuple[str, str, str, str, str]


def rows(result: CalibrationResult) -> list[Row]:
    """The table: one row per statistic, grouped by section; notes say what is undefined."""
    out: list[Row] = []
    agreement = result.agreement
    if agreement is not None:
        n = str(agreement["n"])
        for key, label in _AGREEMENT:
            if key in agreement:
                out.append(_row(label, agreement[key], n))
        alpha = agreement["krippendorff_alpha"]
        for key in ("humans", "with_judge"):
            if alpha.get(key) is not None:
                label = f"Krippendorff's alpha ({alpha['level']}, {key.replace('_', ' + ')})"
                out.append(_row(label.replace("with + judge", "humans + judge"), alpha[key], ""))
        out.extend(("note", "", "", "", text) for text in agreement.get("notes", []))
    bias = result.position_bias
    if bias is not None:
        pairs = str(bias["pairs"])
        out.append(_row("position bias: verdict flips with order", bias["flip_rate"], pairs))
        decided = str(bias["position_a"] + bias["position_b"])
        label = "position bias: picks the one shown first"
        out.append(_row(label, bias["position_a_rate"], decided, "0.5 = no preference"))
    length = result.length_bias
    if length is not None:
        for who in ("judge", "humans"):
            block = length[who]
            label = f"length bias: Spearman of {who}' score vs length".replace("judge'", "judge's")
            out.append(_row(label, block["spearman"], str(block["n"]), length["length"]))
    return out


_AGREEMENT = (
    ("accuracy", "accuracy"),
    ("cohen_kappa", "Cohen's kappa"),
    ("pearson", "Pearson r"),
    ("spearman", "Spearman rho"),
    ("mae", "mean absolute error"),
)


def _row(label: str, stat: dict[str, Any], n: str, note: str = "") -> Row:
    from evalsi.runs import format_number

    ci = stat.get("ci")
    shown_ci = f"[{format_number(ci[0])}, {format_number(ci[1])}]" if ci else "-"
    p = stat.get("p_value")
    extra = f"p = {format_number(p)}" if p is not None else ""
    notes = "; ".join(x for x in (extra, note) if x)
    return (label, format_number(stat.get("value")), shown_ci, n, notes)

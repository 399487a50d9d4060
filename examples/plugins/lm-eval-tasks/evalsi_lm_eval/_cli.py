"""``evalsi-lm-eval``: an lm-evaluation-harness task as an evalsi dataset (JSONL), and, with
``--spec``, a run spec that generates with an OpenAI-compatible endpoint and grades with
``lm-eval/task-metric``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from evalsi_lm_eval._export import records, target_params
from evalsi_lm_eval._tasks import TaskError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalsi-lm-eval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="write a task's documents as evalsi records")
    export.add_argument("--task", required=True, help="the lm-eval task name")
    export.add_argument("--include-path", default="", help="a folder of task YAML files")
    export.add_argument("--num-fewshot", type=int, default=None)
    export.add_argument("--limit", type=int, default=None, help="the first N documents only")
    export.add_argument("--system-instruction", default=None)
    export.add_argument(
        "--no-chat",
        action="store_true",
        help="the plain prompt (a completions model's) instead of chat messages",
    )
    export.add_argument(
        "--fewshot-in-one-turn",
        action="store_true",
        help="few-shot examples inside one user message (lm-eval's fewshot_as_multiturn=False)",
    )
    export.add_argument("-o", "--out", required=True, help="the JSONL file to write")
    export.add_argument("--spec", help="also write a run spec (EvalRun YAML) here")
    export.add_argument("--base-url", help="the spec's OpenAI-compatible endpoint (…/v1)")
    export.add_argument("--model", help="the spec's model name")
    return parser


def _spec(args: argparse.Namespace, out: Path) -> dict[str, object]:
    task_params: dict[str, object] = {"task": args.task}
    if args.include_path:
        task_params["include_path"] = str(Path(args.include_path).resolve())
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": args.task.lower().replace("_", "-")},
        "spec": {
            "target": {
                "model": {
                    "connector": "openai-compatible",
                    "baseUrl": args.base_url,
                    "model": args.model,
                    "params": target_params(args.task, args.include_path),
                }
            },
            "dataset": {"path": str(out.resolve()), "fields": {"output": ""}},
            "evaluators": [{"ref": "lm-eval/task-metric", "params": task_params}],
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.spec and not (args.base_url and args.model):
        print("error: --spec needs --base-url and --model", file=sys.stderr)
        return 2
    for flag, value in (("--num-fewshot", args.num_fewshot), ("--limit", args.limit)):
        if value is not None and value < 0:
            print(f"error: {flag} must be 0 or more, not {value}", file=sys.stderr)
            return 2
    out = Path(args.out)
    try:
        rows = list(
            records(
                args.task,
                args.include_path,
                num_fewshot=args.num_fewshot,
                limit=args.limit,
                chat=not args.no_chat,
                fewshot_as_multiturn=not args.fewshot_in_one_turn,
                system_instruction=args.system_instruction,
            )
        )
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        if args.spec:
            Path(args.spec).write_text(yaml.safe_dump(_spec(args, out), sort_keys=False))
    except (TaskError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(rows)} records of {args.task} to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``evalsi benchmark import BENCHMARK SRC -o DIR``: a benchmark's own task format read into an
evalsi dataset and the spec that runs or grades it (``evalsi.benchmarks``)."""

from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path
from typing import Any

import orjson

from evalsi.cli._output import note, print_json, print_table
from evalsi.core import UserError

BENCHMARK = """\
Read a benchmark's own task files into an evalsi dataset and the EvalRun spec that runs it on
evalsi's harness, scored as the benchmark's reference scorer does:

  evalsi benchmark import swebench INSTANCES.jsonl --repo owner/name=PATH -o DIR
  evalsi benchmark import terminal-bench TASK_DIR... -o DIR      (Terminal-Bench or Harbor)
  evalsi benchmark import bfcl DATA_DIR -o DIR [--category simple_python]
  evalsi benchmark import inspect-task FILE.py@task -o DIR
  evalsi benchmark import inspect-log LOG.eval -o DIR
  evalsi benchmark import tau2 DOMAIN_DIR --tools MODULE -o DIR --agent-model JSON \\
      --user-model JSON

Then `evalsi run -f DIR/<spec>` (or, for a benchmark whose records already hold answers,
`evalsi eval --data DIR/<dataset>`). Nothing is downloaded: repositories, task directories and
data files are local. Guide: docs/guides/agents/benchmarks.md.
"""

JSON_MODEL = 'a model mapping as JSON, e.g. \'{"connector": "scripted", "model": "gold"}\''


def register(commands: Any) -> None:
    b = commands.add_parser(
        "benchmark",
        help="import a benchmark's tasks (SWE-bench, Terminal-Bench, BFCL, Inspect, tau2)",
        description=BENCHMARK,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = b.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = actions.add_parser(
        "import",
        help="read a benchmark's task files into a dataset and a spec",
        description=BENCHMARK,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kinds = imp.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)

    s = _kind(kinds, "swebench", "SWE-bench instances (JSON or JSONL) on local clones")
    s.add_argument("src", metavar="INSTANCES", type=Path)
    s.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="a local clone of an instance's repository, repeatable",
    )
    s.add_argument(
        "--agent-command",
        default="true",
        metavar="ARGV",
        help="the CLI agent's command line (split on spaces; default: true, an empty patch)",
    )
    s.add_argument("--gold", action="store_true", help="an agent that applies the gold patch")
    s.add_argument(
        "--test-command",
        default=None,
        metavar="ARGV",
        help="the repository's test runner (split on spaces; default: python3 -m pytest -rA)",
    )
    s.add_argument("--log-format", choices=("pytest", "unittest"), default="pytest")
    s.add_argument("--min-isolation", default="namespaced", metavar="LEVEL")
    s.add_argument("--test-timeout", type=float, default=300.0, metavar="SECONDS")
    s.add_argument("--name", default="swebench", help="the run's and the files' name")

    t = _kind(kinds, "terminal-bench", "Terminal-Bench or Harbor task directories")
    t.add_argument("src", metavar="TASK_DIR", type=Path, nargs="+")
    t.add_argument("--model", default=None, metavar="JSON", help=f"the agent's model: {JSON_MODEL}")
    t.add_argument("--name", default="terminal-bench")

    f = _kind(kinds, "bfcl", "BFCL function-calling questions and possible answers")
    f.add_argument("src", metavar="DATA", type=Path, help="BFCL's data directory or one file")
    f.add_argument("--category", action="append", default=None, metavar="NAME")
    f.add_argument("--with-gold", action="store_true", help="the gold calls as each trajectory")

    i = _kind(kinds, "inspect-task", "an Inspect AI task's samples (FILE.py@task or module:task)")
    i.add_argument("src", metavar="TASK")
    i.add_argument("--model", default=None, metavar="JSON", help=f"the target model: {JSON_MODEL}")
    i.add_argument("--name", default=None)

    g = _kind(kinds, "inspect-log", "an Inspect AI .eval log's scored samples")
    g.add_argument("src", metavar="LOG", type=Path)

    u = _kind(kinds, "tau2", "a tau2-bench-format domain (tasks.json, db.json, policy.md)")
    u.add_argument("src", metavar="DOMAIN", type=Path)
    u.add_argument(
        "--tools",
        required=True,
        metavar="MODULE",
        help="the module of the domain's tool functions (its TOOLS and WRITES lists, if any)",
    )
    u.add_argument("--agent-model", required=True, metavar="JSON", help=JSON_MODEL)
    u.add_argument("--user-model", required=True, metavar="JSON", help="the simulated user's")
    u.add_argument("--name", default="")


def _kind(kinds: Any, name: str, help: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = kinds.add_parser(name, help=help, description=help)
    p.add_argument("-o", "--out", required=True, type=Path, metavar="DIR", help="where to write")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    dataset, spec, count = _import(args)
    out = {
        "benchmark": args.benchmark,
        "dataset": str(dataset),
        "spec": str(spec) if spec is not None else None,
        "count": count,
    }
    if args.format == "json":
        print_json(out)
        return 0
    rows = [["dataset", out["dataset"]], ["spec", out["spec"] or "-"], ["rows", str(count)]]
    print_table(["", args.benchmark], rows)
    if spec is not None:
        note(f"next: evalsi run -f {spec}")
    else:
        note(f"next: evalsi eval --data {dataset} --evaluators ...")
    return 0


def _import(args: argparse.Namespace) -> tuple[Path, Path | None, int]:
    import evalsi.benchmarks as bench

    kind = args.benchmark
    if kind == "swebench":
        got = bench.import_swebench(
            args.src,
            args.out,
            _repos(args.repo),
            agent_command=tuple(args.agent_command.split()) or ("true",),
            gold=args.gold,
            **({"test_command": tuple(args.test_command.split())} if args.test_command else {}),
            log_format=args.log_format,
            min_isolation=args.min_isolation,
            test_timeout_s=args.test_timeout,
            name=args.name,
        )
        return got.dataset, got.spec, got.count
    if kind == "terminal-bench":
        done = bench.import_terminal_bench(
            args.src, args.out, model=_model(args.model, "--model"), name=args.name
        )
    elif kind == "bfcl":
        done = bench.import_bfcl(
            args.src, args.out, categories=args.category, with_gold=args.with_gold
        )
    elif kind == "inspect-task":
        done = bench.import_inspect_task(
            args.src, args.out, model=_model(args.model, "--model"), name=args.name
        )
    elif kind == "inspect-log":
        done = bench.import_inspect_log(args.src, args.out)
    else:
        return _tau(args)
    return done.dataset, done.spec, done.count


def _tau(args: argparse.Namespace) -> tuple[Path, Path | None, int]:
    import evalsi.benchmarks as bench

    try:
        module = importlib.import_module(args.tools)
    except ImportError as e:
        raise UserError(
            f"--tools: cannot import {args.tools!r}: {e}",
            hint="run from the directory holding the module, or put it on PYTHONPATH",
        ) from None
    names = list(getattr(module, "TOOLS", ()) or _functions(module))
    if not names:
        raise UserError(f"--tools: {args.tools} defines no tool functions")
    agent, user = _model(args.agent_model, "--agent-model"), _model(args.user_model, "--user-model")
    assert agent is not None
    assert user is not None
    spec = bench.tau_run_spec(
        args.src,
        args.tools,
        args.out,
        agent=agent,
        user=user,
        tool_names=names,
        writes=frozenset(getattr(module, "WRITES", ())),
        name=args.name,
    )
    dataset = args.out / "tasks.jsonl"
    with dataset.open("rb") as rows:
        count = sum(1 for line in rows if line.strip())
    return dataset, spec, count


def _functions(module: Any) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value) and value.__module__ == module.__name__ and name[0] != "_"
    ]


def _repos(items: list[str]) -> dict[str, Path]:
    repos: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise UserError(f"--repo {item!r}: expected OWNER/NAME=PATH")
        repos[name.strip()] = Path(path).expanduser()
    return repos


def _model(text: str | None, flag: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise UserError(f"{flag}: not JSON: {e}", hint=JSON_MODEL) from None
    if not isinstance(value, dict) or not {"connector", "model"} <= value.keys():
        raise UserError(f"{flag}: expected a mapping with connector and model", hint=JSON_MODEL)
    return value

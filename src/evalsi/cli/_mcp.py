"""``evalsi mcp``: evalsi's tools for coding agents and MCP clients, over stdio."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalsi.cli._serve import DEFAULT_CONFIG, SERVER_MODULES
from evalsi.core import require_extra

EPILOG = """\
tools (each takes the JSON form of the API request of the same name; schemas from the proto):
  list_evaluators   what can grade (CatalogService.ListEvaluators)
  evaluate          grade records you have (EvaluationService.Evaluate, POST /v1alpha1/evaluate)
  start_run         run an EvalRun spec and wait, with progress; cancelling cancels the run
  get_run, list_runs, compare_runs (paired deltas and a verdict), list_traces, promote
resources:
  evalsi://runs/{id}/report.md   a run's report in Markdown (id: a run id, prefix or latest)
  evalsi://projects/{project}/runs/{id}/report.md   the same, for a run of another project

examples:
  evalsi mcp                                   # stdio; store .evalsi/evalsi.db, datasets in .
  claude mcp add evalsi -- evalsi mcp          # register with a coding agent
  npx @modelcontextprotocol/inspector@0.15.0 --cli evalsi mcp --method tools/list

Runs started here are ordinary runs of the store: `evalsi runs list` shows them. Dataset
paths in specs are relative to the working directory (or evalsi.yaml's datasetsDir), and
Python targets and tools of your own code are allowed, as with `evalsi run`. `evalsi serve`
serves the same tools at /mcp (streamable HTTP), behind its authentication.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "mcp",
        help="serve evalsi's tools to MCP clients (coding agents) over stdio",
        description="Serve evalsi as an MCP server over stdin/stdout: evaluate, run specs, "
        "compare runs, query traces and promote failures, from any MCP client.",
        epilog=EPILOG,
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="evalsi.yaml to read (default: ./evalsi.yaml when it exists): store, judges, "
        "sandbox, datasetsDir",
    )
    p.set_defaults(handler=mcp_command)


def mcp_command(args: argparse.Namespace) -> int:
    require_extra("evalsi mcp", "server", *SERVER_MODULES)
    require_extra("evalsi mcp", "mcp", "mcp")
    from evalsi.server import load_config, serve_mcp_stdio, stdio_config

    path = args.config
    if path is None and Path(DEFAULT_CONFIG).is_file():
        path = Path(DEFAULT_CONFIG)
    configured = path is not None and _names_datasets_dir(path)
    return serve_mcp_stdio(stdio_config(load_config(path), configured))


def _names_datasets_dir(path: Path) -> bool:
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False  # load_config reads it again and words the problem
    return isinstance(doc, dict) and "datasetsDir" in doc

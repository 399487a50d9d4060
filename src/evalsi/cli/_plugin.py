"""``evalsi plugin install | list | remove``: evaluator plugins, each in its own virtual
environment (or served at an address), whose evaluators then appear in the catalog and grade
by ref like built-ins."""

from __future__ import annotations

import argparse
import time
from typing import Any

from evalsi.cli._output import note, print_json, print_table
from evalsi.core import require_extra

EPILOG = """\
examples:
  evalsi plugin install ./acme-plugin              # a folder, a wheel or a requirement
  evalsi plugin install acme-plugin==1.2 --system-site-packages
  evalsi plugin install unix:/run/acme.sock        # a plugin served elsewhere (or HOST:PORT)
  evalsi plugin list
  evalsi plugin remove acme

Plugins are recorded in $EVALSI_DATA_DIR/plugins/plugins.json (default .evalsi/plugins), each
venv beside it. A plugin names its evaluators under the entry-point group evalsi.plugins; see
docs/guides/plugins.md.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "plugin",
        help="install, list and remove evaluator plugins (each in its own virtual environment)",
        description="Evaluator plugins run out of process, in a virtual environment of their "
        "own, so their dependencies never fight evalsi's.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="plugin_command", metavar="COMMAND", required=True)
    i = sub.add_parser("install", help="install a plugin package in a venv of its own")
    i.add_argument("source", metavar="PATH|PKG|ADDRESS")
    i.add_argument(
        "--evalsi",
        metavar="REQUIREMENT",
        help="how the plugin venv gets evalsi (default: this evalsi's own source or version)",
    )
    i.add_argument(
        "--system-site-packages",
        action="store_true",
        help="let the venv see the base interpreter's packages (a faster install)",
    )
    i.add_argument(
        "--pip-arg", action="append", default=[], metavar="ARG", help="passed to pip install"
    )
    i.add_argument("--format", choices=("table", "json"), default="table")
    i.set_defaults(handler=install_command)
    ls = sub.add_parser("list", help="the installed plugins and their evaluators")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    ls.set_defaults(handler=list_command)
    rm = sub.add_parser("remove", help="forget a plugin and delete its venv")
    rm.add_argument("name")
    rm.set_defaults(handler=remove_command)


def _rows(plugins: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "version": p.version,
            "source": p.source,
            "runs": p.url or p.venv,
            "evaluators": [str(m.ref) for m in p.manifests()],
        }
        for p in plugins
    ]


def _show(plugins: list[Any], fmt: str) -> None:
    rows = _rows(plugins)
    if fmt == "json":
        print_json({"plugins": rows})
        return
    print_table(
        ("name", "version", "evaluators", "runs in"),
        [(r["name"], r["version"], ", ".join(r["evaluators"]), r["runs"]) for r in rows],
    )


def install_command(args: argparse.Namespace) -> int:
    require_extra("evalsi plugin", "plugin", "grpc")
    from evalsi.plugins import install_plugin

    started = time.monotonic()
    found = install_plugin(
        args.source,
        evalsi=args.evalsi,
        system_site_packages=args.system_site_packages,
        pip_args=args.pip_arg,
    )
    note(f"installed {', '.join(p.name for p in found)} in {time.monotonic() - started:.1f}s")
    _show(found, args.format)
    return 0


def list_command(args: argparse.Namespace) -> int:
    from evalsi.plugins import load_installed

    _show(load_installed(), args.format)
    return 0


def remove_command(args: argparse.Namespace) -> int:
    from evalsi.plugins import remove_plugin

    gone = remove_plugin(args.name)
    note(f"removed plugin {gone.name}")
    return 0

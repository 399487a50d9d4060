"""``evalsi catalog list|show|packs``: the evaluators and packs available, documented."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Any

from evalsi.cli._output import print_json, print_table
from evalsi.cli._remote import add_server_flag, connect, server_of
from evalsi.core import UserError
from evalsi.evaluators import pack_of


def register(commands: Any) -> None:
    p = commands.add_parser("catalog", help="discover evaluators")
    sub = p.add_subparsers(dest="catalog_command", metavar="SUBCOMMAND", required=True)
    ls = sub.add_parser("list", help="every evaluator available here")
    ls.add_argument("--pack", help="only this pack (e.g. core)")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(ls)
    ls.set_defaults(handler=list_catalog)
    show = sub.add_parser(
        "show", help="one evaluator: what it does, requires, emits, params, example"
    )
    show.add_argument("name", help="a name or ref, e.g. exact-match or builtin/exact-match@1.0.0")
    show.add_argument("--format", choices=("text", "json"), default="text")
    add_server_flag(show)
    show.set_defaults(handler=show_evaluator)
    packs = sub.add_parser(
        "packs",
        help="every pack: its evaluators, the extra it needs, whether the project turns it on",
        description="Packs group evaluators. Naming an evaluator explicitly always works; "
        "evaluators.packs in evalsi.yaml decides which packs run implicitly (online "
        "policies). Only core is on by default.",
    )
    packs.add_argument(
        "--config",
        type=Path,
        help="the project config to read evaluators.packs from (default: ./evalsi.yaml if any)",
    )
    packs.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(packs)
    packs.set_defaults(handler=list_packs)


def _manifest_dict(m: Any) -> dict[str, Any]:
    """An ``EvaluatorManifest`` (local or from a server) as ``--format json`` prints it."""
    return {
        "ref": str(m.ref),
        "name": m.ref.name,
        "namespace": m.ref.namespace,
        "version": m.version,
        "pack": m.pack,
        "scope": m.scope.value,
        "description": m.description,
        "requires": list(m.requires),
        "outputs": [
            {
                "name": o.name,
                "type": o.type,
                "range": list(o.range) if o.range else None,
                "higher_is_better": o.higher_is_better,
            }
            for o in m.outputs
        ],
        "params_schema": m.params_schema,
        "example": m.example,
    }


def list_catalog(args: argparse.Namespace) -> int:
    server = server_of(args)
    if server is not None:
        with connect(server, args) as client:
            items = client.list_evaluators(pack=args.pack or "")
    else:
        from evalsi.cli._evaluators import local_registry

        registry = local_registry()
        items = [ev.manifest for ev in registry if not args.pack or pack_of(ev) == args.pack]
        if args.pack and not items:
            from evalsi.packs import BUILTIN_PACKS

            known = sorted({*BUILTIN_PACKS, *(pack_of(ev) for ev in registry)})
            raise UserError(
                f"--pack: unknown pack {args.pack!r} (known: {', '.join(known)})",
                hint="evalsi catalog packs lists them",
            )
    if args.format == "json":
        print_json({"evaluators": [_manifest_dict(m) for m in items]})
        return 0
    rows = [
        (
            m.ref.name,
            m.version,
            m.pack or m.ref.namespace,
            ", ".join(o.name for o in m.outputs),
            m.description,
        )
        for m in items
    ]
    print_table(("name", "version", "pack", "metrics", "description"), rows)
    return 0


def list_packs(args: argparse.Namespace) -> int:
    server = server_of(args)
    if server is not None:
        if args.config is not None:
            raise UserError("--config reads a local project config; it cannot go with --server")
        with connect(server, args) as client:
            packs = [
                (p.name, p.description, list(p.evaluators), p.extra, p.enabled)
                for p in client.list_packs()
            ]
    else:
        packs = _local_packs(args.config)
    if args.format == "json":
        keys = ("name", "description", "evaluators", "extra", "enabled")
        print_json({"packs": [dict(zip(keys, p, strict=True)) for p in packs]})
        return 0
    rows = [
        (name, "on" if enabled else "off", str(len(evs)), extra and f"evalsi[{extra}]", desc)
        for name, desc, evs, extra, enabled in packs
    ]
    print_table(("pack", "enabled", "evaluators", "needs", "description"), rows)
    return 0


def _local_packs(config: Path | None) -> list[tuple[str, str, list[str], str, bool]]:
    """The packs of this install, enabled as ``evaluators.packs`` of the project config says."""
    from evalsi.cli._evaluators import local_registry
    from evalsi.evaluators import PackOptIn
    from evalsi.packs import BUILTIN_PACKS
    from evalsi.server import load_config

    if config is None and Path("evalsi.yaml").is_file():
        config = Path("evalsi.yaml")
    opt_in = PackOptIn(load_config(config).packs)
    members: dict[str, list[str]] = {name: [] for name in BUILTIN_PACKS}
    for ev in local_registry():
        members.setdefault(pack_of(ev), []).append(ev.name)
    out = []
    for name, evs in members.items():
        pack = BUILTIN_PACKS.get(name)
        desc, extra = (pack.description, pack.extra) if pack else ("", "")
        out.append((name, desc, sorted(evs), extra, opt_in.enabled(name)))
    return out


def show_evaluator(args: argparse.Namespace) -> int:
    server = server_of(args)
    doc = ""
    if server is not None:
        with connect(server, args) as client:
            manifest = client.get_evaluator(args.name)
    else:
        from evalsi.cli._evaluators import local_registry

        ev = local_registry().resolve(args.name)
        manifest, doc = ev.manifest, inspect.cleandoc(ev.__doc__ or "")
    d = _manifest_dict(manifest)
    if args.format == "json":
        print_json(d)
        return 0
    lines = [f"{d['ref']}  ({d['scope']} scope, pack {d['pack'] or d['namespace']})", ""]
    lines.append(d["description"])
    lines += ["", f"requires: {', '.join(d['requires']) or 'nothing'}", "metrics:"]
    for o in d["outputs"]:
        rng = f" in [{o['range'][0]}, {o['range'][1]}]" if o["range"] else ""
        better = {True: ", higher is better", False: ", lower is better", None: ""}[
            o["higher_is_better"]
        ]
        lines.append(f"  {o['name']}: {o['type']}{rng}{better}")
    props = d["params_schema"].get("properties", {})
    required = set(d["params_schema"].get("required", []))
    lines.append("params:" if props else "params: none")
    for key, schema in props.items():
        kind = schema.get("type", "any")
        kind = "|".join(kind) if isinstance(kind, list) else kind
        extra = f" one of {schema['enum']}" if "enum" in schema else ""
        default = " (required)" if key in required else f" = {schema.get('default')!r}"
        lines.append(f"  {key}: {kind}{extra}{default}")
    rest = doc.split("\n\n", 1)[1].strip() if "\n\n" in doc else ""
    if rest:
        lines += ["", rest]
    if d["example"]:
        lines += ["", "example:", "  " + d["example"].replace("\n", "\n  ")]
    print("\n".join(lines))
    return 0

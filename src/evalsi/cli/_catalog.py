"""``evalsi catalog list|show``: the evaluators available, documented."""

from __future__ import annotations

import argparse
from typing import Any

from evalsi.cli._output import print_json, print_table
from evalsi.cli._remote import add_server_flag, connect, server_of


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
        with connect(server) as client:
            items = client.list_evaluators(pack=args.pack or "")
    else:
        from evalsi.packs import builtin_registry

        items = [
            ev.manifest
            for ev in builtin_registry()
            if not args.pack or ev.manifest.pack == args.pack
        ]
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


def show_evaluator(args: argparse.Namespace) -> int:
    server = server_of(args)
    doc = ""
    if server is not None:
        with connect(server) as client:
            manifest = client.get_evaluator(args.name)
    else:
        from evalsi.packs import builtin_registry

        ev = builtin_registry().resolve(args.name)
        manifest, doc = ev.manifest, (ev.__doc__ or "").strip()
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

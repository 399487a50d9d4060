"""``python -m evalsi.plugins [NAME]``: serve the evaluators an installed plugin package names
under the ``evalsi.plugins`` entry-point group on ``unix:$EVALSI_PLUGIN_SOCKET`` (what the host
starts inside the plugin's virtual environment); ``--list`` prints the names found, as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import entry_points

from evalsi.core import UserError


def _main(argv: list[str]) -> int:
    found = {ep.name: ep for ep in entry_points(group="evalsi.plugins")}
    if argv[:1] == ["--list"]:
        print(json.dumps(sorted(found)))
        return 0
    if len(argv) != 1 or argv[0] not in found:
        print(f"usage: python -m evalsi.plugins NAME (installed: {sorted(found)})", file=sys.stderr)
        return 2
    ep = found[argv[0]]
    loaded = ep.load()
    evaluators = list(loaded() if callable(loaded) and not hasattr(loaded, "manifest") else loaded)
    version = ep.dist.version if ep.dist is not None else "0.0.0"
    from evalsi.plugins._serve import serve_plugin

    async def serve() -> None:
        server = await serve_plugin(evaluators, name=ep.name, version=version)
        await server.wait_for_termination()

    try:
        asyncio.run(serve())
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

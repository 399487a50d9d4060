"""``--server URL``: the same commands against ``evalsi serve`` instead of the local store.

The flag defaults to the ``EVALSI_SERVER`` environment variable; flags that only make sense
locally (``--store``...) are refused with it, rather than silently ignored.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from evalsi.core import UserError

if TYPE_CHECKING:
    from evalsi.client import Client

ENV = "EVALSI_SERVER"
HELP = (
    "run this against an evalsi server (`evalsi serve`) at URL, e.g. http://127.0.0.1:8080, "
    f"instead of the local store; default: ${ENV} when set"
)


PROJECT_ENV = "EVALSI_PROJECT"


def add_server_flag(parser: argparse.ArgumentParser, *, project: bool = True) -> None:
    """``--server URL`` and (unless ``project`` is False) ``--project NAME``."""
    parser.add_argument("--server", metavar="URL", default=None, help=HELP)
    if project:
        parser.add_argument(
            "--project",
            metavar="NAME",
            default="",
            help=f"the project to work in (default: ${PROJECT_ENV} when set, else default)",
        )


def project_of(args: argparse.Namespace | None) -> str:
    """``--project``, else ``$EVALSI_PROJECT``, else "" (the server's ``default``)."""
    given = getattr(args, "project", None) if args is not None else None
    return str(given or os.environ.get(PROJECT_ENV, "").strip())


def server_of(args: argparse.Namespace) -> str | None:
    """The server to use: ``--server``, else ``$EVALSI_SERVER``, else None (embedded)."""
    url = getattr(args, "server", None) or os.environ.get(ENV, "").strip()
    return url or None


def refuse_local_flags(args: argparse.Namespace, server: str, **flags: str) -> None:
    """A usage error (exit 2) for each local-only flag given with a server.

    ``flags`` maps an argparse dest to why it cannot go to a server.
    """
    for dest, why in flags.items():
        value = getattr(args, dest, None)
        if value not in (None, False, "", []):
            option = "--" + dest.replace("_", "-")
            raise UserError(
                f"{option} cannot be combined with --server {server}: {why}",
                hint=f"drop {option}, or drop --server (and unset ${ENV}) to work locally",
            )


def connect(server: str, args: argparse.Namespace | None = None) -> Client:
    """An ``evalsi.Client`` for ``server`` in the project ``args`` name (imported here: local
    commands never load it)."""
    from evalsi.client import Client

    return Client(server, project=project_of(args))


def connect_reader(args: argparse.Namespace, server: str) -> Client:
    """``connect``, for a command that reads a store: ``--store`` is refused."""
    refuse_local_flags(args, server, store="the server reads its own store")
    return connect(server, args)

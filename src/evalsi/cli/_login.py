"""``evalsi login | logout | whoami``: signing in to a server with an identity provider."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Mapping
from typing import Any

from evalsi.cli._output import note, print_json, print_table
from evalsi.cli._remote import add_server_flag, connect, server_of
from evalsi.core import UserError

LOGIN = """\
Sign in to an evalsi server with your identity provider (OpenID Connect), and keep the tokens
for later commands against that server:

  evalsi login --server https://evalsi.example.com            device code (works over SSH)
  evalsi login --server https://evalsi.example.com --browser  a browser on this machine

The server says which provider and client to use (auth.cliLogin in its evalsi.yaml, served at
/.well-known/evalsi-auth); --issuer, --client-id and --audience override it. The tokens go to
the OS keyring when one exists, else to ~/.config/evalsi/credentials (mode 0600). Every command
given --server URL (or $EVALSI_SERVER) then sends them, renewed with the refresh token when
they expire; $EVALSI_TOKEN and $EVALSI_API_KEY take precedence. Guide: docs/guides/identity.md.
"""


def register(commands: Any) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    login = commands.add_parser(
        "login",
        help="sign in to a server with your identity provider",
        description=LOGIN,
        formatter_class=raw,
    )
    add_server_flag(login, project=False)
    login.add_argument(
        "--browser",
        action="store_true",
        help="authorization code + PKCE in a browser here (default: device code)",
    )
    login.add_argument(
        "--no-open",
        action="store_true",
        help="with --browser: print the sign-in URL instead of opening a browser",
    )
    login.add_argument("--issuer", help="the provider's issuer URL (default: the server's)")
    login.add_argument("--client-id", help="the OAuth client id (default: the server's)")
    login.add_argument("--audience", help="the audience to ask for (default: the server's)")
    login.add_argument(
        "--timeout",
        type=float,
        default=300,
        metavar="S",
        help="seconds to wait for the sign-in (default: 300)",
    )
    login.set_defaults(handler=login_command)

    logout = commands.add_parser("logout", help="forget the tokens kept for a server")
    add_server_flag(logout, project=False)
    logout.set_defaults(handler=logout_command)

    whoami = commands.add_parser(
        "whoami", help="who a server takes you for, and your roles in each project"
    )
    add_server_flag(whoami)
    whoami.add_argument("--format", choices=("table", "json"), default="table")
    whoami.set_defaults(handler=whoami_command)


def need_server(args: argparse.Namespace, command: str) -> str:
    server = server_of(args)
    if server is None:
        raise UserError(
            f"evalsi {command} needs a server", hint="pass --server URL, or set $EVALSI_SERVER"
        )
    return server


# -- login, logout, whoami --------------------------------------------------------------------
def login_command(args: argparse.Namespace) -> int:
    from evalsi.auth import device_login, keep_login, pkce_login

    server = need_server(args, "login")
    offered = _login_info(server)
    issuer = args.issuer or offered.get("issuer", "")
    client_id = args.client_id or offered.get("client_id", "")
    audience = args.audience or offered.get("audience") or None
    if not issuer or not client_id:
        raise UserError(
            f"{server} does not say where to sign in (no auth.cliLogin in its evalsi.yaml)",
            hint="ask its operator to set auth.cliLogin, or pass --issuer and --client-id",
        )

    def prompt(code: str, uri: str, complete: str | None) -> None:
        print(f"To sign in, open {uri} and enter the code {code}", file=sys.stderr, flush=True)
        if complete:
            print(f"  (or open {complete})", file=sys.stderr, flush=True)

    def open_browser(url: str) -> None:
        print(f"Sign in at {url}", file=sys.stderr, flush=True)
        if not args.no_open:
            webbrowser.open(url)

    async def sign_in() -> Any:
        async with asyncio.timeout(args.timeout):
            if args.browser:
                return await pkce_login(
                    issuer,
                    client_id,
                    audience=audience,
                    open_browser=open_browser,
                    timeout_s=args.timeout,
                )
            return await device_login(issuer, client_id, audience=audience, prompt=prompt)

    try:
        tokens = asyncio.run(sign_in())
    except TimeoutError:
        raise UserError(
            f"no sign-in in {args.timeout:g} s", hint="run evalsi login again"
        ) from None
    from evalsi.client import Client

    with Client(server, token=tokens.access_token) as client:  # does the server take it?
        me = client.whoami()
    keep_login(server, tokens)
    note(f"logged in to {server} as {_who(me)}")
    return 0


def _login_info(server: str) -> dict[str, str]:
    url = server.rstrip("/") + "/.well-known/evalsi-auth"
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            info = json.loads(answer.read(65536))
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise UserError(f"cannot ask {server} how to sign in: {e}") from None
    if not isinstance(info, dict):
        raise UserError(f"{url} did not answer with a JSON object")
    return {k: v for k, v in info.items() if isinstance(v, str)}


def logout_command(args: argparse.Namespace) -> int:
    from evalsi.auth import forget_login

    server = need_server(args, "logout")
    note(f"logged out of {server}" if forget_login(server) else f"not logged in to {server}")
    return 0


def whoami_command(args: argparse.Namespace) -> int:
    server = need_server(args, "whoami")
    with connect(server, args) as client:
        me = client.whoami()
    if args.format == "json":
        print_json(me)
        return 0
    if not me.get("authentication"):
        print(f"{server} runs without authentication: every caller is local")
        return 0
    print(_who(me))
    rows = [(r["project"], ", ".join(r["roles"])) for r in me.get("roles", [])]
    print_table(("project", "roles"), rows or [("(none)", "")])
    return 0


def _who(me: Mapping[str, Any]) -> str:
    if not me.get("authentication"):
        return "local (the server runs without authentication)"
    who = f"{me['provider']}/{me['subject']}" if me.get("provider") else str(me["subject"])
    return f"{who} ({me['kind']})" + (f" <{me['email']}>" if me.get("email") else "")

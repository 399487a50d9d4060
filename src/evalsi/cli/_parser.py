"""The argument parser every ``evalsi`` command uses: a mistyped flag or command is answered
by the usage of the command it was typed for and a "did you mean".

Plain argparse lets a subcommand hand its unknown flags back to the top parser, which then
prints ``usage: evalsi [-h] [--version] COMMAND ...``: the one usage line that does not help.
And when a required flag is missing too, argparse reports the missing one, although the
mistyped flag is usually why it is missing (``--evaluater x`` leaves ``--evaluators`` unset).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class EvalsiParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors name the subcommand's usage and suggest a fix.

    Subparsers made with ``add_subparsers`` are of the same class, so every level behaves so.
    """

    _seen: list[str] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # An epilog is laid out by hand (examples, exit codes): printed as written.
        if kwargs.get("epilog"):
            kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._seen = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            # Unknown here is unknown everywhere: the parent parser would only report it with
            # its own, less useful, usage line.
            unknown = self._unknown_options() or extras
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_options()
        if unknown and not message.startswith("unrecognized arguments"):
            # The mistyped flag comes first: it is usually why a required one is missing.
            message = f"unrecognized arguments: {' '.join(unknown)}"
        hint = self._hint(message, unknown)
        self.print_usage(sys.stderr)
        text = f"{self.prog}: error: {message}\n"
        if hint:
            text += f"  hint: {hint}\n"
        self.exit(2, text)

    def _unknown_options(self) -> list[str]:
        """The option-like arguments this parser cannot place, in the order given."""
        unknown: list[str] = []
        has_commands = self._subparsers is not None
        for token in self._seen or ():
            if token == "--":
                break
            if not token.startswith("-") or token == "-" or _NUMBER.match(token):
                if has_commands:
                    break  # the rest is the subcommand's to judge
                continue
            if not self._knows(token):
                unknown.append(token)
        return unknown

    def _knows(self, token: str) -> bool:
        name = token.split("=", 1)[0]
        options = self._option_string_actions
        if name in options:
            return True
        if name.startswith("--"):
            return self.allow_abbrev and any(o.startswith(name) for o in options)
        return name[:2] in options  # -qv, -ofile: a short flag with more after it

    def _hint(self, message: str, unknown: list[str]) -> str:
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
            if close:
                return f"did you mean {close[0]!r}?"
            return f"`{self.prog} --help` lists them"
        longs = sorted(o for o in self._option_string_actions if o.startswith("--"))
        for token in unknown:
            close = difflib.get_close_matches(token.split("=", 1)[0], longs, n=1, cutoff=0.6)
            if close:
                return f"did you mean {close[0]}? (`{self.prog} --help` lists every option)"
        if unknown:
            return f"`{self.prog} --help` lists every option"
        return ""

"""Registry: which evaluators exist, found by reference. An object, never global state."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from evalsi.core import EvaluatorRef, UnknownEvaluatorError, UserError, parse_ref
from evalsi.evaluators._code import is_code_ref
from evalsi.evaluators._decorator import Evaluator

ENTRY_POINT_GROUP = "evalsi.evaluators"

Loader = Callable[[], Iterable[Evaluator]]
"""Imports a group of evaluators (a pack's module) and returns them."""


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    # Numeric parts compare as numbers, so 1.10.0 > 1.9.0; pre-release tags sort after digits.
    pieces = version.replace("-", ".").replace("+", ".").split(".")
    return tuple((0, int(p)) if p.isdigit() else (-1, p) for p in pieces)


class Registry:
    """Evaluators by ``namespace/name`` and version.

    Example:
        >>> from evalsi.evaluators import evaluator
        >>> reg = Registry()
        >>> @evaluator(name="acme/yes", version="1.0.0")
        ... def yes(record):
        ...     return True
        >>> reg.register(yes)
        >>> reg.resolve("yes").ref
        'acme/yes@1.0.0'
    """

    def __init__(self, evaluators: Iterable[Evaluator] = ()) -> None:
        self._items: dict[str, dict[str, Evaluator]] = {}
        self._code: dict[str, Evaluator] = {}  # "file.py:name" as typed -> what it loaded
        # qualified name -> (the names its loader declares, the loader): known, not imported
        self._deferred: dict[str, tuple[frozenset[str], Loader]] = {}
        for ev in evaluators:
            self.register(ev)

    def defer(self, names: Iterable[str], load: Loader) -> None:
        """Know the evaluators ``names`` (``namespace/name``) now; import them (``load()``) when
        one of them is first resolved, iterated or registered over.

        Resolving ``exact-match`` then imports the core pack only, not every pack and what
        they import (start-up, issue 16). ``load`` must return exactly ``names``.
        """
        group = frozenset(names)
        for qualified in group:
            parse_ref(qualified)  # a malformed name fails here, not at first use
            self._deferred[qualified] = (group, load)

    def _load(self, qualified: str) -> None:
        """Import the deferred group that declares ``qualified`` (nothing when none does)."""
        entry = self._deferred.get(qualified)
        if entry is None:
            return
        group, load = entry
        loaded = list(load())  # a failed import leaves the group deferred, to fail again
        got = {ev.manifest.name for ev in loaded}
        if got != group:
            missing, extra = sorted(group - got), sorted(got - group)
            raise UserError(
                f"evaluators declared and loaded differ: missing {missing}, undeclared {extra}",
                hint="the index of deferred evaluators is out of date with their module",
            )
        for name in group:
            del self._deferred[name]
        for ev in loaded:
            self.register(ev)

    def _load_all(self) -> None:
        while self._deferred:
            self._load(next(iter(self._deferred)))

    def register(self, ev: Evaluator, *, code_ref: str = "") -> None:
        """Add an evaluator; registering the same name@version twice with other code fails.

        ``code_ref``: the ``file.py:name`` or ``module:name`` the evaluator was loaded from
        (``load_code_evaluator``); it then resolves by that text only, never by its name, so
        a file cannot shadow an installed evaluator.
        """
        if not isinstance(ev, Evaluator):
            raise TypeError(f"not an evaluator (decorate it with @evaluator): {ev!r}")
        if code_ref:
            self._code[code_ref] = ev
            return
        self._load(ev.manifest.name)  # a deferred evaluator of that name is compared with it
        versions = self._items.setdefault(ev.manifest.name, {})
        existing = versions.get(ev.manifest.version)
        if existing is not None and existing.target is not ev.target:
            raise UserError(f"evaluator {ev.ref} is registered twice with different code")
        versions[ev.manifest.version] = ev

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register evaluators that installed packages publish; returns the refs added.

        An entry point names an ``Evaluator`` or an iterable of them. A broken entry point is
        an error naming the distribution, not a warning: silently missing evaluators would make
        a suite lie.
        """
        from importlib import metadata  # ~50 ms of email and zip modules: only when called

        added = []
        for ep in metadata.entry_points(group=group):
            dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
            where = f"evaluator entry point {ep.name!r} = {ep.value!r} of {dist}"
            try:
                obj: Any = ep.load()
            except Exception as e:  # third-party import failure, reported with its origin
                raise UserError(f"cannot load {where}: {type(e).__name__}: {e}") from e
            if isinstance(obj, Evaluator):
                items = [obj]
            elif isinstance(obj, (list, tuple)) and all(isinstance(o, Evaluator) for o in obj):
                items = list(obj)
            else:
                raise UserError(
                    f"{where} is not an evaluator",
                    hint="point it at an @evaluator-decorated object or a list of them",
                )
            for ev in items:
                self.register(ev)
                added.append(ev.ref)
        return added

    def resolve(self, ref: str | EvaluatorRef) -> Evaluator:
        """Find ``builtin/exact-match@1.0.0``, ``builtin/exact-match`` or ``exact-match``.

        Without a version the newest wins. An unknown name is an error listing close matches.
        """
        if isinstance(ref, str) and is_code_ref(ref):
            found = self._code.get(ref)
            if found is None:
                raise UnknownEvaluatorError(
                    f"evaluator {ref!r} is code from a file or module, and was not loaded here",
                    hint="the command line loads FILE.py:NAME and MODULE:NAME (evalsi eval, "
                    "grade, run); a server only knows the evaluators installed in it",
                )
            return found
        parsed = parse_ref(ref) if isinstance(ref, str) else ref
        known = self._items.keys() | self._deferred.keys()
        if parsed.namespace:
            candidates = [parsed.qualified] if parsed.qualified in known else []
        else:
            candidates = [q for q in sorted(known) if q.split("/", 1)[1] == parsed.name]
            if len(candidates) > 1:
                builtin = f"builtin/{parsed.name}"
                if builtin not in candidates:
                    options = ", ".join(sorted(candidates))
                    raise UnknownEvaluatorError(
                        f"evaluator name {parsed.name!r} is ambiguous: {options}",
                        hint="write the namespace too, e.g. " + sorted(candidates)[0],
                    )
                candidates = [builtin]
        if not candidates:
            raise UnknownEvaluatorError(
                f"unknown evaluator {str(parsed)!r}", hint=self._suggest(parsed)
            )
        self._load(candidates[0])
        versions = self._items[candidates[0]]
        if parsed.version:
            found = versions.get(parsed.version)
            if found is None:
                have = ", ".join(sorted(versions, key=_version_key))
                raise UnknownEvaluatorError(
                    f"evaluator {candidates[0]} has no version {parsed.version} (have: {have})"
                )
            return found
        return versions[max(versions, key=_version_key)]

    def _suggest(self, parsed: EvaluatorRef) -> str:
        names = sorted({q.split("/", 1)[1] for q in self._items.keys() | self._deferred.keys()})
        close = difflib.get_close_matches(parsed.name, names, n=3, cutoff=0.5)
        if close:
            return "did you mean " + ", ".join(close) + "? (`evalsi catalog list` shows all)"
        return "`evalsi catalog list` shows the evaluators available"

    def __iter__(self) -> Iterator[Evaluator]:
        """The newest version of each evaluator, sorted by name."""
        self._load_all()
        for qualified in sorted(self._items):
            versions = self._items[qualified]
            yield versions[max(versions, key=_version_key)]

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, str):
            return False
        try:
            self.resolve(ref)
        except UserError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._items.keys() | self._deferred.keys())

"""Evaluators named as code on the command line (``--evaluators ./evals.py:name`` or
``my_pkg.evals:name``, and the same refs in a run spec): loaded here, at the edge, into the
registry the command hands to the engine."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from evalsi.cli._output import note
from evalsi.core import UserError

if TYPE_CHECKING:
    from evalsi.evaluators import Registry
    from evalsi.store import RunInfo


def local_registry() -> Registry:
    """The built-in registry plus the evaluators of every installed plugin (``evalsi plugin``);
    a plugin starts only when one of its evaluators is bound."""
    from evalsi.packs import builtin_registry

    registry = builtin_registry()
    if has_plugins():
        from evalsi.plugins import add_plugins

        add_plugins(registry)
    return registry


def has_plugins() -> bool:
    """Whether any plugin is installed (one file test: ``evalsi eval`` stays fast without)."""
    from evalsi.plugins import registry_file

    return registry_file().is_file()


def code_registry(
    refs: Iterable[str], *, where: str, server: str | None = None, base: Path | None = None
) -> Registry | None:
    """The built-in registry plus installed plugins and every code evaluator among ``refs``
    (registered under the text typed), or None when ``refs`` names no code and no plugin is
    installed (the engine's default registry then).

    Raises:
        UserError: a code ref that cannot be loaded, or any code ref with ``--server`` (the
            code is here, the grading would be there).
    """
    from evalsi.evaluators import is_code_ref

    code = list(dict.fromkeys(r for r in refs if is_code_ref(r)))
    if not code:
        return local_registry() if server is None and has_plugins() else None
    if server is not None:
        raise UserError(
            f"{where}: {code[0]!r} is code on this machine; the server at {server} cannot run it",
            hint="drop --server to grade here, or install the evaluator on the server as a "
            "package (entry point evalsi.evaluators)",
        )
    from evalsi.evaluators import load_code_evaluator

    registry = local_registry()
    for ref in code:
        registry.register(load_code_evaluator(ref, base=base, where=where), code_ref=ref)
    return registry


def spec_registry(path: str) -> Registry | None:
    """``code_registry`` for the evaluator refs of the run spec at ``path``; a file is relative
    to the spec's folder, as the spec's dataset path is."""
    from evalsi.runs import load_run_spec

    spec = load_run_spec(path)
    base = Path(spec.source).parent if spec.source else None
    refs = [e.ref for e in spec.evaluators]
    return code_registry(refs, where=f"{path}: spec.evaluators", base=base)


def stored_registry(info: RunInfo) -> Registry | None:
    """``code_registry`` for a stored Run's code evaluators (``evalsi rerun``), loaded from the
    refs its spec was written with, relative to the spec's folder; a file whose sha256 differs
    from the one the run recorded is a warning: the rerun grades with today's code."""
    if info.kind != "run":
        return None
    import hashlib

    from evalsi.runs import stored_spec

    spec = stored_spec(info)
    base = Path(str(info.spec["source"])).parent if info.spec.get("source") else None
    registry = code_registry(
        [e.ref for e in spec.evaluators], where=f"run {info.id}: spec.evaluators", base=base
    )
    for entry in info.spec.get("evaluators") or []:
        source = entry.get("source") if isinstance(entry, dict) else None
        if isinstance(source, dict) and "file" in source and "sha256" in source:
            path = Path(str(source["file"]))
            now = (
                f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
                if path.is_file()
                else "missing"
            )
            if now != source["sha256"]:
                note(
                    f"warning: {path} changed since run {info.id} (sha256 {now}, was "
                    f"{source['sha256']}): the rerun grades with the code as it is now"
                )
    return registry

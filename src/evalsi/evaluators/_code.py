"""Evaluators from code, without packaging: ``path/to/file.py:name`` or ``module:name``.

What promptfoo and Inspect users expect: point the command line at a Python file (or an
importable module) and the object in it. The object is an ``@evaluator``; a plain function or
class is wrapped as ``@evaluator`` with its defaults would (record scope, needs ``output``,
``local/<name>@0.0.0``), since that is exactly what the bare decorator means.

Loading happens at the edge (the command line), which registers the result under the text the
user typed (``Registry.register(ev, code_ref=...)``); the engine only resolves refs. The
evaluator carries its origin in ``Evaluator.source`` (the file's absolute path and sha256, or
the module and its file), and every run stores it with the evaluator's spec, so a run says
which code graded it.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from evalsi.core import UserError
from evalsi.evaluators._decorator import Evaluator, evaluator

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
"""A module name, or an attribute path inside one."""

# One module per file version: two refs into one file share its module (and its globals).
_loaded: dict[tuple[str, str], Any] = {}


def is_code_ref(text: str) -> bool:
    """Whether an evaluator reference names code (``x.py:name``, ``pkg.mod:name``), not a
    registered evaluator (``namespace/name@version``, which never holds a colon)."""
    return ":" in text


def load_code_evaluator(text: str, *, base: Path | None = None, where: str = "") -> Evaluator:
    """The evaluator ``text`` names: ``FILE.py:NAME`` (relative to ``base``, default the
    working directory) or ``MODULE:NAME`` (importable, the working directory included).

    Raises:
        UserError: a malformed reference, a missing file or module, an import that fails
            (its exception's message, not a traceback), no such name, or an object that is
            not an evaluator and cannot be wrapped as one.
    """
    at = f"{where}: " if where else ""
    shown = f"{at}evaluator {text!r}"
    target, sep, attr = text.rpartition(":")
    if not sep or not target or not _DOTTED.match(attr):
        raise UserError(
            f"{shown}: expected FILE.py:NAME or MODULE:NAME",
            hint="for example --evaluators ./my_evals.py:numeric_close or my_pkg.evals:tone",
        )
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target) if base is None else base / target  # shown as typed
        module, source = _load_file(path, shown)
    elif _DOTTED.match(target):
        module, source = _import_module(target, shown)
    else:
        raise UserError(
            f"{shown}: {target!r} is neither a .py file nor a module name",
            hint="a file ends in .py (./evals.py:name); a module is dotted (my_pkg.evals:name)",
        )
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{shown}: {source['where']} has no {attr!r}", hint=_near(module, attr))
        obj = getattr(obj, part)
    found = _as_evaluator(obj, shown)
    # A copy: the object may be shared (a built-in reached through its module), and only
    # this one was loaded by reference.
    ev = Evaluator(found.target, found.manifest, found.params)
    ev.source = {**{k: v for k, v in source.items() if k != "where"}, "object": attr}
    return ev


def _load_file(path: Path, shown: str) -> tuple[Any, dict[str, str]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{shown}: no file {path}") from None
    except OSError as e:
        raise UserError(f"{shown}: cannot read {path}: {e.strerror or e}") from e
    resolved = path.resolve()
    digest = hashlib.sha256(data).hexdigest()
    source = {"file": str(resolved), "sha256": f"sha256:{digest}", "where": str(path)}
    key = (str(resolved), digest)
    if key in _loaded:
        return _loaded[key], source
    # A name of its own per file version, so two files called evals.py do not collide and
    # the module is in sys.modules (dataclasses and pickling look it up there).
    name = f"evalsi_code_{re.sub(r'[^A-Za-z0-9_]', '_', resolved.stem)}_{digest[:12]}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UserError(f"{shown}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Its own folder on the path, as `python file.py` does, so helpers beside it import.
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # the user's code: its message, not our traceback
        del sys.modules[name]
        raise UserError(f"{shown}: loading {path} failed: {_describe(e, resolved)}") from e
    _loaded[key] = module
    return module, source


def _import_module(name: str, shown: str) -> tuple[Any, dict[str, str]]:
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)  # as `python -m` would find it
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise UserError(
                f"{shown}: no module {e.name!r}",
                hint="is it in the working directory, on PYTHONPATH, or installed here? "
                "A file is named with its .py: ./evals.py:name",
            ) from None
        raise UserError(f"{shown}: importing {name} failed: {_describe(e, None)}") from e
    except (Exception, SystemExit) as e:
        raise UserError(f"{shown}: importing {name} failed: {_describe(e, None)}") from e
    source = {"module": name, "where": f"module {name}"}
    file = getattr(module, "__file__", None)
    if file:
        try:
            digest = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        except OSError:
            pass
        else:
            source.update(file=str(Path(file).resolve()), sha256=f"sha256:{digest}")
    return module, source


def _as_evaluator(obj: Any, shown: str) -> Evaluator:
    if isinstance(obj, Evaluator):
        return obj
    if not callable(obj):
        kind = type(obj).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"  # an int, a PosixPath
        raise UserError(
            f"{shown}: is {article} {kind}, not an evaluator",
            hint="name a function decorated with @evaluator (from evalsi import evaluator)",
        )
    try:
        return evaluator(obj)
    except TypeError as e:
        raise UserError(
            f"{shown}: cannot be used as an evaluator: {e}",
            hint="decorate it with @evaluator(...) to say what it needs and returns",
        ) from e


def _describe(error: BaseException, file: Path | None) -> str:
    """``Type: message (FILE:LINE)``, the line being the deepest one in the user's file."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, SyntaxError) and error.lineno is not None:
        return f"SyntaxError: {error.msg} (line {error.lineno})"
    if file is not None:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == file]
        if frames:
            text += f" (line {frames[-1].lineno})"
    return text


def _near(module: Any, attr: str) -> str:
    names = [n for n, v in vars(module).items() if isinstance(v, Evaluator)]
    close = difflib.get_close_matches(attr, names or list(vars(module)), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    if names:
        return "its evaluators: " + ", ".join(sorted(names))
    return "it defines no @evaluator"

"""The CEL engine (the ``common-expression-language`` package) without its command line.

``import cel`` runs the package's ``__init__``, which imports its own CLI and with it typer, rich
and prompt-toolkit: about 0.1 s that a run with gates paid before its first target call. The
engine itself is one compiled module, ``cel.cel``; this loads it alone and registers it under
that name, so a later ``import cel`` anywhere in the process finds and reuses it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

_ENGINE = "cel.cel"
_lock = threading.Lock()


def cel_module() -> ModuleType:
    """The compiled CEL engine: ``compile``, ``evaluate``, ``Context``, ``Program``.

    Example:
        >>> cel_module().evaluate("1 + 2")
        3
    """
    loaded = sys.modules.get(_ENGINE)
    if loaded is not None:
        return loaded
    with _lock:
        loaded = sys.modules.get(_ENGINE)
        return loaded if loaded is not None else _load()


def _load() -> ModuleType:
    package = importlib.util.find_spec("cel")  # finds the package without running its __init__
    folders = package.submodule_search_locations if package is not None else None
    for folder in folders or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"cel{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(_ENGINE, str(path))
                spec = importlib.util.spec_from_file_location(_ENGINE, path, loader=loader)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[_ENGINE] = module
                loader.exec_module(module)
                return module
    return importlib.import_module(_ENGINE)  # an unexpected layout: the ordinary way

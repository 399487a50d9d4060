"""A plugin package served from a plain folder (fast), not a venv of its own: the package is
pip-installed into a folder put on the plugin process's path, with everything else from this
interpreter. ``evalsi plugin install`` builds the real venv (tests/e2e/test_e2e_plugin_venv.py)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import evalsi
from evalsi.evaluators import Registry
from evalsi.plugins import InstalledPlugin, PluginHost, plugin_evaluators
from evalsi.wire import manifest_from_proto

SRC = Path(evalsi.__file__).resolve().parents[1]


def install_to_folder(package: Path, site: Path, build: Path) -> Path:
    """``package`` (a source folder) installed into ``site`` without its dependencies; built
    from a copy in ``build`` so the build's leftovers stay out of the source folder."""
    shutil.copytree(package, build / "pkg", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-t", str(site), str(build / "pkg")], check=True, capture_output=True)
    return site


def started_plugin(
    package: Path, entry_point: str, site: Path, **options: Any
) -> tuple[PluginHost, Registry]:
    """The plugin ``entry_point`` of the package installed in ``site``, started, and a registry
    of its evaluators (as ``evalsi plugin install`` records them)."""
    plugin = InstalledPlugin(
        name=entry_point,
        version="",
        source=str(package),
        python=sys.executable,
        entry_point=entry_point,
    )
    env = {"PYTHONPATH": os.pathsep.join((str(SRC), str(site)))}
    host = PluginHost(plugin, env=env, **options)
    host.start()
    assert host.description is not None
    docs = tuple(
        InstalledPlugin.manifest_doc(manifest_from_proto(m)) for m in host.description.evaluators
    )
    host.plugin = dataclasses.replace(plugin, version=host.description.version, evaluators=docs)
    return host, Registry(plugin_evaluators(host.plugin, host))

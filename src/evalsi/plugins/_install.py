"""``evalsi plugin install | list | remove``: a plugin's own virtual environment, built with
the host's Python, holding the plugin package and evalsi's plugin runtime (``evalsi[plugin]``,
the same evalsi as the host's; docs/decisions/0014), recorded in the plugin registry file.

A source that is an address (``unix:PATH``, ``grpc://HOST:PORT``, ``HOST:PORT``) is a plugin
served elsewhere: nothing is installed, its ``Describe`` is recorded.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from evalsi.core import UserError
from evalsi.plugins._host import PluginHost
from evalsi.plugins._installed import (
    InstalledPlugin,
    load_installed,
    plugins_dir,
    save_installed,
)
from evalsi.wire import manifest_from_proto

_ADDRESS = re.compile(r"^(unix:.+|grpc://.+|[A-Za-z0-9.\-\[\]:]+:\d+)$")


def evalsi_requirement() -> str:
    """How a plugin venv gets evalsi: the host's own source or wheel when it was installed
    from one (its ``direct_url.json``), else the same released version."""
    try:
        dist = distribution("evalsi")
    except PackageNotFoundError:
        raise UserError(
            "evalsi is not installed as a distribution here, so a plugin venv cannot get it",
            hint="pass --evalsi with a requirement (a wheel, a source folder, evalsi==X)",
        ) from None
    text = dist.read_text("direct_url.json")
    if text:
        url = json.loads(text).get("url", "")
        if url.startswith("file://"):
            return f"evalsi[plugin] @ {url}"
    return f"evalsi[plugin]=={dist.version}"


def _requirement(given: str | None) -> str:
    if not given:
        return evalsi_requirement()
    path = Path(given)
    if path.exists():  # a source folder or a wheel: pip wants a URL to add the extra
        return f"evalsi[plugin] @ {path.resolve().as_uri()}"
    return given


def _run(argv: list[str], what: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise UserError(f"{what} failed ({done.returncode}): {tail}")
    return done.stdout


def _slug(source: str) -> str:
    stem = Path(source).name if Path(source).exists() else source
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "plugin"


def install_plugin(
    source: str,
    *,
    base: Path | None = None,
    evalsi: str | None = None,
    system_site_packages: bool = False,
    pip_args: Sequence[str] = (),
    start_timeout_s: float = 60.0,
) -> list[InstalledPlugin]:
    """Install the plugin package ``source`` (a folder, a wheel or a requirement) in a venv
    of its own, or record the plugin service at address ``source``; returns what was recorded.

    Raises:
        UserError: the venv or pip failed, the package names no plugin, or a plugin did not
            start (each naming what and why).
    """
    if _ADDRESS.match(source) and not Path(source).exists():
        url = source.removeprefix("grpc://")
        probe = InstalledPlugin(name=url, version="", source=source, url=url)
        found = [_described(probe, start_timeout_s)]
    else:
        venv = plugins_dir(base) / _slug(source)
        if venv.exists():
            shutil.rmtree(venv)
        venv.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "venv", str(venv)]
        _run([*argv, "--system-site-packages"] if system_site_packages else argv, "python -m venv")
        python = str(venv / "bin" / "python")
        target = str(Path(source).resolve()) if Path(source).exists() else source
        _run(
            [python, "-m", "pip", "install", "-q", *pip_args, _requirement(evalsi), target],
            f"pip install {source}",
        )
        names = json.loads(_run([python, "-m", "evalsi.plugins", "--list"], "listing plugins"))
        if not names:
            shutil.rmtree(venv)
            raise UserError(
                f"{source}: the package declares no plugin",
                hint='add [project.entry-points."evalsi.plugins"] NAME = "module:EVALUATORS"',
            )
        found = [
            _described(
                InstalledPlugin(
                    name=n, version="", source=source, python=python, entry_point=n, venv=str(venv)
                ),
                start_timeout_s,
            )
            for n in names
        ]
    keep = [p for p in load_installed(base) if p.name not in {f.name for f in found}]
    save_installed([*keep, *found], base)
    return found


def _described(plugin: InstalledPlugin, start_timeout_s: float) -> InstalledPlugin:
    host = PluginHost(plugin, start_timeout_s=start_timeout_s)
    try:
        host.start()
        d = host.description
    finally:
        host.close()
    assert d is not None
    name = plugin.name if not plugin.url else (d.name or plugin.name)
    docs = tuple(InstalledPlugin.manifest_doc(manifest_from_proto(m)) for m in d.evaluators)
    return InstalledPlugin(
        name=name,
        version=d.version,
        source=plugin.source,
        python=plugin.python,
        entry_point=plugin.entry_point,
        venv=plugin.venv,
        url=plugin.url,
        evaluators=docs,
    )


def remove_plugin(name: str, base: Path | None = None) -> InstalledPlugin:
    """Forget plugin ``name`` and delete its venv when no other plugin shares it.

    Raises:
        UserError: no plugin of that name is installed.
    """
    plugins = load_installed(base)
    gone = next((p for p in plugins if p.name == name), None)
    if gone is None:
        known = ", ".join(p.name for p in plugins) or "none"
        raise UserError(f"no plugin {name!r} is installed (installed: {known})")
    rest = [p for p in plugins if p.name != name]
    save_installed(rest, base)
    if gone.venv and not any(p.venv == gone.venv for p in rest):
        shutil.rmtree(gone.venv, ignore_errors=True)
    return gone

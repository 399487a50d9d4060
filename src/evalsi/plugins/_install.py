"""``evalsi plugin install | list | remove``: a plugin's own virtual environment, built with
the host's Python, holding the plugin package and evalsi's plugin runtime (``evalsi[plugin]``,
the same evalsi as the host's; docs/decisions/0014), recorded in the plugin registry file.

A source that is an address (``unix:PATH``, ``grpc://HOST:PORT``, ``HOST:PORT``) is a plugin
served elsewhere: nothing is installed, its ``Describe`` is recorded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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


def _requirement(given: str | None, python: str, work: Path) -> str:
    """The requirement that installs evalsi in the plugin venv. A source folder is built into
    a wheel first, without pip's cache: pip caches a folder's build by its URL, so an older
    build of the same folder would be installed instead of today's code."""
    text = given or evalsi_requirement()
    url = text.split(" @ ", 1)[1] if " @ " in text else ""
    path = Path(url.removeprefix("file://")) if url.startswith("file://") else Path(text)
    if not path.exists():
        return text
    return f"evalsi[plugin] @ {_wheel(path, python, work / 'evalsi').as_uri()}"


_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".evalsi",
    "*_cache",
    "node_modules",
)


def _wheel(path: Path, python: str, work: Path) -> Path:
    """``path`` itself when it is a wheel; a source folder built into one, freshly, from a
    copy (a build in place leaves ``build/`` and ``*.egg-info`` in the reader's folder, and an
    egg-info on a PYTHONPATH makes pip believe the package is installed)."""
    if not path.is_dir():
        return path.resolve()
    copy = work / "src"
    shutil.copytree(path, copy, ignore=_NOT_COPIED)
    build = [python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(work)]
    _run([*build, str(copy)], f"building {path}")
    return next(work.glob("*.whl")).resolve()


def _run(argv: list[str], what: str) -> str:
    # The venv sees only itself: the host's PYTHONPATH would show pip the host's evalsi as
    # already installed, and the plugin would run with it.
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
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
        if ("/" in source or source.startswith(".")) and not Path(source).exists():
            raise UserError(
                f"{source}: no such file or folder",
                hint="give a plugin package's folder, a wheel, or a requirement (acme-plugin==1.2)",
            )
        venv = plugins_dir(base) / _slug(source)
        if venv.exists():
            shutil.rmtree(venv)
        venv.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "venv", str(venv)]
        _run([*argv, "--system-site-packages"] if system_site_packages else argv, "python -m venv")
        python = str(venv / "bin" / "python")
        try:
            found = _install_into(venv, python, source, evalsi, pip_args, start_timeout_s)
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)  # a failed install leaves nothing behind
            raise
    keep = [p for p in load_installed(base) if p.name not in {f.name for f in found}]
    save_installed([*keep, *found], base)
    return found


def _install_into(
    venv: Path,
    python: str,
    source: str,
    evalsi: str | None,
    pip_args: Sequence[str],
    start_timeout_s: float,
) -> list[InstalledPlugin]:
    """pip-install ``source`` and evalsi into ``venv``, then describe each plugin it names."""
    with tempfile.TemporaryDirectory(prefix="evalsi-wheel-") as work:
        requirement = _requirement(evalsi, python, Path(work))
        local = Path(source)
        target = str(_wheel(local, python, Path(work) / "plugin")) if local.exists() else source
        _run(
            [python, "-m", "pip", "install", "-q", *pip_args, requirement, target],
            f"pip install {source}",
        )
    names = json.loads(_run([python, "-m", "evalsi.plugins", "--list"], "listing plugins"))
    if not names:
        raise UserError(
            f"{source}: the package declares no plugin",
            hint='add [project.entry-points."evalsi.plugins"] NAME = "module:EVALUATORS"',
        )
    return [
        _described(
            InstalledPlugin(
                name=n, version="", source=source, python=python, entry_point=n, venv=str(venv)
            ),
            start_timeout_s,
        )
        for n in names
    ]


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

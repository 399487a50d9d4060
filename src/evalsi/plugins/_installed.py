"""The plugin registry file: which plugins are installed, where they run and what they serve.

``<data dir>/plugins/plugins.json`` (data dir ``$EVALSI_DATA_DIR``, default ``.evalsi``, the
store's folder) lists each plugin with its virtual environment's Python and entry-point name,
or its URL, and the manifests its ``Describe`` answered at install time, so the catalog lists a
plugin's evaluators (with their params schemas) without starting it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalsi.core import EvaluatorManifest, UserError

FORMAT_VERSION = 1
DATA_DIR_ENV = "EVALSI_DATA_DIR"


def data_dir() -> Path:
    """``$EVALSI_DATA_DIR``, else ``.evalsi`` (where the result store lives by default)."""
    return Path(os.environ.get(DATA_DIR_ENV) or ".evalsi")


def plugins_dir(base: Path | None = None) -> Path:
    return (base if base is not None else data_dir()) / "plugins"


@dataclass(frozen=True)
class InstalledPlugin:
    """One installed plugin. ``python`` + ``entry_point`` for a plugin run as a subprocess in
    its own venv (``venv``), ``url`` for one served elsewhere."""

    name: str
    version: str
    source: str
    python: str = ""
    entry_point: str = ""
    venv: str = ""
    url: str = ""
    evaluators: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def manifests(self) -> list[EvaluatorManifest]:
        # the wire's converters, imported when a plugin is actually read
        from google.protobuf import json_format

        from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2
        from evalsi.wire import manifest_from_proto

        out = []
        for doc in self.evaluators:
            message = evaluator_pb2.EvaluatorManifest()
            json_format.ParseDict(doc, message)
            out.append(manifest_from_proto(message))
        return out

    @staticmethod
    def manifest_doc(manifest: EvaluatorManifest) -> dict[str, Any]:
        from google.protobuf import json_format

        from evalsi.wire import manifest_to_proto

        return dict(json_format.MessageToDict(manifest_to_proto(manifest)))


def registry_file(base: Path | None = None) -> Path:
    """Where the installed plugins are listed."""
    return plugins_dir(base) / "plugins.json"


def load_installed(base: Path | None = None) -> list[InstalledPlugin]:
    """The installed plugins (none when the file does not exist).

    Raises:
        UserError: the file is not a plugin registry of a version this evalsi reads.
    """
    path = registry_file(base)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable plugin registry ({e})") from None
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        found = doc.get("version") if isinstance(doc, dict) else "?"
        raise UserError(
            f"{path}: plugin registry version {found} is not {FORMAT_VERSION}",
            hint="reinstall the plugins with evalsi plugin install",
        )
    plugins = []
    for item in doc.get("plugins") or []:
        item = dict(item)
        item["evaluators"] = tuple(item.get("evaluators") or ())
        plugins.append(InstalledPlugin(**item))
    return plugins


def save_installed(plugins: list[InstalledPlugin], base: Path | None = None) -> None:
    path = registry_file(base)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "version": FORMAT_VERSION,
        "plugins": [
            {**asdict(p), "evaluators": list(p.evaluators)}
            for p in sorted(plugins, key=lambda p: p.name)
        ],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a file

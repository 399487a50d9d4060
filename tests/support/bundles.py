"""Helpers for tests of evidence bundles."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson


def reseal(bundle: Path) -> None:
    """The manifest's sizes and checksums made to match the files again, in its canonical
    form, as a forger who edited a file would."""
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    for entry in manifest["files"]:
        data = (bundle / entry["path"]).read_bytes()
        entry["size"] = len(data)
        entry["sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
    (bundle / "manifest.json").write_bytes(
        orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )

"""Evidence bundles kept in the object store (``objectStore:``), where they outlive the server
that built them and anyone holding the bucket can fetch them back.

Each file a bundle's manifest lists is stored content-addressed under ``bundles/files``
(a file two bundles share is stored once), then ``manifest.json`` itself under
``bundles/runs/<run id>``, last, as on disk: a manifest in the store means every file it lists
is there. A bundle's address is its run id and its manifest's sha256. Fetching writes a new
directory from the manifest down, each file checked against the sha256 the manifest gives, the
manifest last; the result is an ordinary bundle (``evalsi bundle validate DIR``). A signature
(``manifest.json.sig``) is not archived: it is made by whoever signs, after the fact.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from evalsi.core import UserError
from evalsi.evidence._format import MANIFEST, MAX_JSON_BYTES, Entry, safe_name
from evalsi.evidence._write import _new_directory
from evalsi.store import ObjectRef, ObjectStore

FILES = "bundles/files"
HASHED = re.compile(r"[0-9a-f]{64}")


def runs_space(run_id: str) -> str:
    return f"bundles/runs/{run_id}"


def archive_bundle(directory: Path, run_id: str, objects: ObjectStore) -> ObjectRef:
    """Store the bundle in ``directory``; the reference of its stored manifest. A file whose
    bytes differ from what the manifest says is refused, not stored."""
    manifest_bytes = (directory / MANIFEST).read_bytes()
    for entry in _entries(manifest_bytes, str(directory / MANIFEST)):
        ref, _ = objects.upload(directory / entry.path, FILES)
        if (ref.sha256, ref.size) != (entry.sha256, entry.size):
            raise UserError(
                f"{directory / entry.path}: its bytes differ from {MANIFEST} "
                "(changed after the bundle was written); not archived"
            )
    ref, _ = objects.put(manifest_bytes, runs_space(run_id))
    return ref


def archived_bundles(objects: ObjectStore, run_id: str) -> list[str]:
    """The manifest sha256 of every archived bundle of ``run_id``."""
    return objects.hashes(runs_space(run_id))


def fetch_bundle(objects: ObjectStore, run_id: str, manifest_sha256: str, out: Path) -> int:
    """The archived bundle into the new or empty directory ``out``; the number of files."""
    directory = _new_directory(Path(out))
    key = objects.key_of(runs_space(run_id), manifest_sha256)
    manifest = objects.get(
        ObjectRef(key, manifest_sha256, objects.size(key)), max_bytes=MAX_JSON_BYTES
    )
    entries = _entries(manifest, key)
    for entry in entries:
        objects.download(FILES, entry.sha256, directory / entry.path, max_bytes=entry.size)
    (directory / MANIFEST).write_bytes(manifest)
    return len(entries) + 1


def _entries(manifest: bytes, where: str) -> list[Entry]:
    """The files a manifest lists, each a safe plain name with a size and sha256."""
    try:
        files = orjson.loads(manifest)["files"]
        entries = [
            Entry(str(f["path"]), int(f["size"]), str(f["sha256"]).removeprefix("sha256:"))
            for f in files
        ]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise UserError(f"{where}: not a bundle manifest ({type(e).__name__}: {e})") from None
    for entry in entries:
        if not safe_name(entry.path) or entry.path == MANIFEST or entry.size < 0:
            raise UserError(f"{where}: lists {entry.path!r}, not a file of a bundle")
        if not HASHED.fullmatch(entry.sha256):
            raise UserError(f"{where}: {entry.path}: not a sha256: {entry.sha256!r}")
    return entries


__all__ = ["archive_bundle", "archived_bundles", "fetch_bundle"]

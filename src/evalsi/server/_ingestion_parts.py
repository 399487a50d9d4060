"""Where an ingest's records are kept on the server: the JSONL file its Score run reads back.

An ingested run is a Score run whose ``spec["data"]`` is ``<data_dir>/ingested/<run_id>.jsonl``
(rows as ``datasets.record_to_row`` writes them, read with the default fields), so whatever
re-reads a Score run's records (reports, evidence bundles) reads them as any dataset, and the
run's dataset version is that file's content hash, as a dataset reader computes it.

The chunks of an ingest arrive one by one and may arrive twice (a retry whose answer was lost),
so each is kept as a part of its own, named by its offset and replaced whole when it comes
again: a file appended to would hold a retried chunk twice. A chunk is either the next one or
one sent before with as many records (the last may change size), so the parts always cover
0..N-1 without gap or overlap; finalize joins them in order into the run's file. Each part's
rows are written before its note (``.json``: count, trials, results missing), and only a part
with a note counts, so a part is never half there.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
from connectrpc.code import Code
from connectrpc.errors import ConnectError

SUBDIR = "ingested"
_NOTE = re.compile(r"(\d{12})\.json")
MISSING_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class Part:
    """One chunk as kept: where it starts, how many records, what its results say."""

    offset: int
    count: int
    trials: int
    missing: int
    missing_examples: tuple[str, ...] = ()

    @property
    def end(self) -> int:
        return self.offset + self.count


class IngestFiles:
    """The parts of one run's records and the file they are joined into."""

    def __init__(self, data_dir: Path, run_id: str) -> None:
        root = data_dir / SUBDIR
        self.path = root / f"{run_id}.jsonl"
        self.parts_dir = root / f"{run_id}.parts"

    def parts(self) -> list[Part]:
        """The parts kept so far, in order."""
        if not self.parts_dir.is_dir():
            return []
        found = []
        for entry in self.parts_dir.iterdir():
            if _NOTE.fullmatch(entry.name):
                note = orjson.loads(entry.read_bytes())
                found.append(
                    Part(
                        offset=int(note["offset"]),
                        count=int(note["count"]),
                        trials=int(note["trials"]),
                        missing=int(note["missing"]),
                        missing_examples=tuple(note.get("missing_examples", ())),
                    )
                )
        return sorted(found, key=lambda p: p.offset)

    def received(self) -> int:
        """Records received so far: where the next chunk starts."""
        parts = self.parts()
        return parts[-1].end if parts else 0

    def check(self, offset: int, count: int) -> None:
        """Refuse a chunk that is neither the next one nor one sent before, again (409)."""
        parts = self.parts()
        end = parts[-1].end if parts else 0
        if offset == end:
            return
        same = next((i for i, p in enumerate(parts) if p.offset == offset), None)
        if same is None:
            raise ConnectError(
                Code.FAILED_PRECONDITION,
                f"offset: {offset} is not where a chunk starts: the next chunk starts at {end} "
                "(the records received so far); a chunk sent before starts at "
                f"{', '.join(str(p.offset) for p in parts[:5]) or 'none yet'}"
                f"{', ...' if len(parts) > 5 else ''}",
            )
        if same < len(parts) - 1 and parts[same].count != count:
            raise ConnectError(
                Code.FAILED_PRECONDITION,
                f"records: the chunk at offset {offset} was sent before with "
                f"{parts[same].count} records; sent again it must hold as many (only the last "
                "chunk may change size)",
            )

    def write(self, part: Part, lines: Iterable[bytes]) -> None:
        """Keep one chunk's lines (replacing the part at its offset), then its note."""
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        name = f"{part.offset:012d}"
        _replace(self.parts_dir / f"{name}.jsonl", b"".join(lines))
        note = {
            "offset": part.offset,
            "count": part.count,
            "trials": part.trials,
            "missing": part.missing,
            "missing_examples": list(part.missing_examples),
        }
        _replace(self.parts_dir / f"{name}.json", orjson.dumps(note))

    def join(self, parts: list[Part]) -> Path:
        """The parts joined, in order, into the run's file (replacing an earlier join)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".join-")
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with (self.parts_dir / f"{part.offset:012d}.jsonl").open("rb") as f:
                        shutil.copyfileobj(f, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path

    def discard_parts(self) -> None:
        """The parts, once the run holding their joined file is finalized."""
        shutil.rmtree(self.parts_dir, ignore_errors=True)


def _replace(path: Path, data: bytes) -> None:
    """``path`` holding ``data``, atomically: a reader sees the old content or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

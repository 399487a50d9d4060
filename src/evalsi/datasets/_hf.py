"""``hf://`` datasets, read offline from the local Hugging Face hub cache.

evalsi never downloads: the dataset must already be in the cache (``huggingface-cli download``
or ``datasets.load_dataset`` on any machine, then copy the cache). The cache is
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``; a dataset lives in
``datasets--OWNER--NAME/snapshots/<revision>/``, the revision being the one ``refs/main`` names
or else the newest snapshot.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evalsi.core import DatasetError

SCHEME: Final = "hf://"
DEFAULT_SPLIT: Final = "test"

# Data formats in order of preference when a split ships in several.
_FORMATS: Final = (
    (".parquet",),
    (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz"),
    (".json", ".json.gz"),
    (".csv", ".csv.gz"),
)
_SUFFIXES: Final = tuple(s for group in _FORMATS for s in group)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_OFFLINE_HINT = (
    "evalsi reads Hugging Face datasets offline, from the local hub cache only. Download the "
    "dataset on a connected machine (huggingface-cli download --repo-type dataset {repo}), copy "
    "the cache here, and point HF_HUB_CACHE (or HF_HOME) at it."
)


@dataclass(frozen=True, slots=True)
class HfRef:
    """A parsed ``hf://OWNER/NAME[/SUBSET][@SPLIT]``."""

    owner: str
    name: str
    subset: str | None
    split: str

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"


def parse_hf_uri(uri: str) -> HfRef:
    """Parse ``hf://[datasets/]OWNER/NAME[/SUBSET][@SPLIT]`` (the split defaults to ``test``).

    Example:
        >>> parse_hf_uri("hf://openai/gsm8k/main@train")
        HfRef(owner='openai', name='gsm8k', subset='main', split='train')
    """
    if not uri.startswith(SCHEME):
        raise DatasetError(f"not an {SCHEME} URI", path=uri)
    rest = uri[len(SCHEME) :]
    rest, at, split = rest.partition("@")
    if not at:
        split = DEFAULT_SPLIT
    parts = rest.strip("/").split("/")
    if parts[0] == "datasets" and len(parts) >= 3:
        parts = parts[1:]
    if len(parts) not in (2, 3) or not all(_NAME.fullmatch(p) for p in [*parts, split]):
        raise DatasetError(
            "expected hf://OWNER/NAME[/SUBSET][@SPLIT]",
            path=uri,
            hint="for example hf://openai/gsm8k/main@test",
        )
    return HfRef(parts[0], parts[1], parts[2] if len(parts) == 3 else None, split)


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the Hugging Face hub cache is, by the same rules as ``huggingface_hub``."""
    env = os.environ if env is None else env
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(env[var]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg).expanduser() / "huggingface" / "hub"


def resolve_hf_files(uri: str, cache: Path | None = None) -> tuple[Path, list[Path]]:
    """The snapshot directory and the data files of the URI's split, in reading order."""
    try:
        return _resolve(uri, cache)
    except OSError as e:
        raise DatasetError(f"cannot read the Hugging Face cache: {e}", path=uri) from e


def _resolve(uri: str, cache: Path | None) -> tuple[Path, list[Path]]:
    ref = parse_hf_uri(uri)
    cache = hub_cache_dir() if cache is None else cache
    hint = _OFFLINE_HINT.format(repo=ref.repo)
    repo_dir = cache / f"datasets--{ref.owner}--{ref.name}"
    if not repo_dir.is_dir():
        where = "the cache" if cache.is_dir() else "the cache (which does not exist)"
        raise DatasetError(
            f"dataset {ref.repo} is not in {where}: looked for {repo_dir}", path=uri, hint=hint
        )
    snapshot = _snapshot(repo_dir, uri, hint)
    base = snapshot
    if ref.subset is not None:
        base = snapshot / ref.subset
        if not base.is_dir():
            subsets = sorted(p.name for p in snapshot.iterdir() if p.is_dir() and _visible(p.name))
            raise DatasetError(
                f"no subset {ref.subset!r} in {snapshot} "
                f"(directories there: {', '.join(subsets) or 'none'})",
                path=uri,
            )
    files = sorted(_data_files(base))
    chosen = _for_split(files, base, ref, uri)
    if not chosen:
        listed = ", ".join(str(f.relative_to(base)) for f in files[:10]) or "none"
        more = f" and {len(files) - 10} more" if len(files) > 10 else ""
        raise DatasetError(
            f"no data files for split {ref.split!r} in {base} (data files there: {listed}{more})",
            path=uri,
            hint=f"name another split with @SPLIT (hf://{ref.repo}@train); {hint}",
        )
    return snapshot, chosen


def _snapshot(repo_dir: Path, uri: str, hint: str) -> Path:
    snapshots = repo_dir / "snapshots"
    main = repo_dir / "refs" / "main"
    if main.is_file():
        revision = main.read_text(encoding="utf-8").strip()
        if revision and (snapshots / revision).is_dir():
            return snapshots / revision
    candidates = [p for p in snapshots.iterdir() if p.is_dir()] if snapshots.is_dir() else []
    if not candidates:
        raise DatasetError(f"no snapshot of the dataset in {snapshots}", path=uri, hint=hint)
    return max(candidates, key=lambda p: (p.stat().st_mtime, p.name))


def _visible(name: str) -> bool:
    return not name.startswith((".", "_"))


def _data_files(base: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        dirnames[:] = [d for d in dirnames if _visible(d)]
        for filename in filenames:
            if _visible(filename) and filename.lower().endswith(_SUFFIXES):
                yield Path(dirpath) / filename


def _strip_suffix(name: str) -> str:
    lower = name.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _for_split(files: list[Path], base: Path, ref: HfRef, uri: str) -> list[Path]:
    """The files that hold the split, from one subset and in one format.

    A file belongs to the split when the split's name appears in its path between separators:
    ``data/test-00000-of-00001.parquet``, ``test.jsonl``, ``gsm8k_test.jsonl``, ``test/0.parquet``.
    On the right only ``-``, ``.``, ``/``, digits or the end count, so ``validation`` does not
    pick up ``validation_matched`` files.
    """
    pattern = re.compile(
        rf"(?:^|[-._ /0-9]){re.escape(ref.split)}(?:$|[-. /0-9])", flags=re.IGNORECASE
    )
    matched = [f for f in files if pattern.search(_strip_suffix(f.relative_to(base).as_posix()))]
    if not matched:
        return []
    if ref.subset is None:
        matched = _one_subset(matched, base, ref, uri)
    for group in _FORMATS:
        of_format = [f for f in matched if f.name.lower().endswith(group)]
        if of_format:
            return of_format
    return []  # pragma: no cover - every data file has one of the suffixes


def _one_subset(files: list[Path], base: Path, ref: HfRef, uri: str) -> list[Path]:
    """Without a subset in the URI, keep the default layout or the only subset there is."""

    def top(f: Path) -> str:
        parts = f.relative_to(base).parts
        return parts[0] if len(parts) > 1 else ""

    groups: dict[str, list[Path]] = {}
    for f in files:
        groups.setdefault(top(f), []).append(f)
    default = [f for name in ("", "data", ref.split) for f in groups.get(name, [])]
    if default or len(groups) == 1:
        return default or files
    names = sorted(groups)
    raise DatasetError(
        f"split {ref.split!r} exists in several subsets: {', '.join(names)}",
        path=uri,
        hint=f"name one, for example hf://{ref.repo}/{names[0]}@{ref.split}",
    )

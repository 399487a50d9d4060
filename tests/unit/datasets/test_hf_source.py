"""hf:// datasets read offline from a (fake, but real-shaped) Hugging Face hub cache."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalsi.core import DatasetError, Record
from evalsi.datasets import Dataset, HfRef, hub_cache_dir, open_dataset, parse_hf_uri

REVISION = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """A hub cache laid out like huggingface_hub's: snapshot files link to blobs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def repo(self, owner: str, name: str) -> Path:
        return self.root / f"datasets--{owner}--{name}"

    def add(
        self,
        rel: str,
        content: bytes,
        *,
        owner: str = "acme",
        name: str = "qa",
        revision: str = REVISION,
        main: bool = True,
    ) -> Path:
        repo = self.repo(owner, name)
        blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        target = repo / "snapshots" / revision / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        target.symlink_to(os.path.relpath(blob, target.parent))
        if main:
            (repo / "refs").mkdir(exist_ok=True)
            (repo / "refs" / "main").write_text(revision)
        return target


def parquet_bytes(rows: list[dict[str, Any]], tmp: Path) -> bytes:
    path = tmp / "tmp.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    data = path.read_bytes()
    path.unlink()
    return data


def jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    return FakeHub(root)


# -- URIs and the cache location ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "ref"),
    [
        ("hf://openai/gsm8k", HfRef("openai", "gsm8k", None, "test")),
        ("hf://openai/gsm8k@train", HfRef("openai", "gsm8k", None, "train")),
        ("hf://openai/gsm8k/main@train", HfRef("openai", "gsm8k", "main", "train")),
        ("hf://datasets/openai/gsm8k/main", HfRef("openai", "gsm8k", "main", "test")),
        ("hf://datasets/openai/gsm8k", HfRef("openai", "gsm8k", None, "test")),
    ],
)
def test_parse_uris(uri: str, ref: HfRef) -> None:
    assert parse_hf_uri(uri) == ref


@pytest.mark.parametrize(
    "uri", ["hf://gsm8k", "hf://a/b/c/d", "hf://a/b@", "hf://a/../b", "hf://a/b@train[:10]"]
)
def test_unusable_uris(uri: str) -> None:
    with pytest.raises(DatasetError, match=r"expected hf://OWNER/NAME\[/SUBSET\]\[@SPLIT\]"):
        open_dataset(uri)


def test_where_the_cache_is() -> None:
    assert hub_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hub_cache_dir({"HF_HOME": "/h"}) == Path("/h/hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()


# -- resolution ------------------------------------------------------------------------------


def test_parquet_shards_of_the_default_split(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(
        "data/test-00000-of-00002.parquet",
        parquet_bytes([{"input": "a"}, {"input": "b"}], tmp_path),
    )
    hub.add("data/test-00001-of-00002.parquet", parquet_bytes([{"input": "c"}], tmp_path))
    hub.add("data/train-00000-of-00001.parquet", parquet_bytes([{"input": "t"}], tmp_path))
    hub.add("README.md", b"# qa")
    ds = open_dataset("hf://acme/qa")
    records = read(ds, 2)
    assert ds.format == "hf"
    assert ds.name == "hf://acme/qa"
    assert [r.input.text for r in records if r.input] == ["a", "b", "c"]
    # generated ids keep counting across shards
    assert [r.id for r in records] == ["1", "2", "3"]
    assert records[2].provenance is not None
    assert records[2].provenance.dataset.endswith("data/test-00001-of-00002.parquet")
    assert records[2].provenance.line == 1
    first = ds.version
    assert first is not None
    again = open_dataset("hf://datasets/acme/qa@test")
    read(again, 1)
    assert again.version == first
    hub.add("data/test-00001-of-00002.parquet", parquet_bytes([{"input": "C"}], tmp_path))
    changed = open_dataset("hf://acme/qa")
    read(changed)
    assert changed.version != first


def test_jsonl_splits_by_name(hub: FakeHub) -> None:
    hub.add("train.jsonl", jsonl_bytes([{"input": "t"}]))
    hub.add("qa_validation.jsonl", jsonl_bytes([{"input": "v"}]))
    hub.add("validation_matched.jsonl", jsonl_bytes([{"input": "vm"}]))
    assert [r.input.text for r in read(open_dataset("hf://acme/qa@train")) if r.input] == ["t"]
    got = read(open_dataset("hf://acme/qa@validation"))
    assert [r.input.text for r in got if r.input] == ["v"]
    got = read(open_dataset("hf://acme/qa@validation_matched"))
    assert [r.input.text for r in got if r.input] == ["vm"]


def test_one_format_is_read_when_a_split_ships_in_several(hub: FakeHub, tmp_path: Path) -> None:
    hub.add("data/test.jsonl", jsonl_bytes([{"input": "j"}]))
    hub.add("data/test.csv", b"input\nc\n")
    assert [r.input.text for r in read(open_dataset("hf://acme/qa")) if r.input] == ["j"]
    hub.add("data/test-0.parquet", parquet_bytes([{"input": "p"}], tmp_path))
    assert [r.input.text for r in read(open_dataset("hf://acme/qa")) if r.input] == ["p"]


def test_subsets(hub: FakeHub, tmp_path: Path) -> None:
    hub.add("main/test-00000-of-00001.parquet", parquet_bytes([{"input": "m"}], tmp_path))
    hub.add("socratic/test-00000-of-00001.parquet", parquet_bytes([{"input": "s"}], tmp_path))
    got = read(open_dataset("hf://acme/qa/socratic@test"))
    assert [r.input.text for r in got if r.input] == ["s"]
    with pytest.raises(DatasetError, match="several subsets: main, socratic") as info:
        open_dataset("hf://acme/qa")
    assert "hf://acme/qa/main@test" in str(info.value)
    with pytest.raises(DatasetError, match=r"no subset 'nope'.*main, socratic"):
        open_dataset("hf://acme/qa/nope")


def test_a_single_subset_needs_no_name(hub: FakeHub) -> None:
    hub.add("default/test/0000.jsonl", jsonl_bytes([{"input": "d"}]))
    assert [r.input.text for r in read(open_dataset("hf://acme/qa")) if r.input] == ["d"]


def test_refs_main_picks_the_snapshot(hub: FakeHub) -> None:
    hub.add("test.jsonl", jsonl_bytes([{"input": "pinned"}]))
    other = "f" * 40
    hub.add("test.jsonl", jsonl_bytes([{"input": "other"}]), revision=other, main=False)
    older = hub.repo("acme", "qa") / "snapshots" / REVISION
    os.utime(older, (1_000_000, 1_000_000))
    assert [r.input.text for r in read(open_dataset("hf://acme/qa")) if r.input] == ["pinned"]
    # without refs/main, the newest snapshot
    (hub.repo("acme", "qa") / "refs" / "main").unlink()
    assert [r.input.text for r in read(open_dataset("hf://acme/qa")) if r.input] == ["other"]


def test_bad_lines_name_the_cached_file(hub: FakeHub) -> None:
    path = hub.add("test.jsonl", b'{"input": "a"}\n{oops\n')
    with pytest.raises(DatasetError) as info:
        read(open_dataset("hf://acme/qa"))
    assert info.value.path == str(path)
    assert info.value.line == 2


# -- what is missing ---------------------------------------------------------------------------


def test_a_dataset_missing_from_the_cache(hub: FakeHub) -> None:
    with pytest.raises(DatasetError) as info:
        open_dataset("hf://acme/absent")
    message = str(info.value)
    assert message.startswith("hf://acme/absent: dataset acme/absent is not in the cache")
    assert str(hub.root / "datasets--acme--absent") in message
    assert "offline" in message
    assert "HF_HUB_CACHE" in message


def test_a_missing_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nowhere"))
    with pytest.raises(DatasetError, match=r"the cache \(which does not exist\)"):
        open_dataset("hf://acme/qa")


def test_a_repo_without_snapshots(hub: FakeHub) -> None:
    (hub.repo("acme", "qa") / "blobs").mkdir(parents=True)
    with pytest.raises(DatasetError, match="no snapshot"):
        open_dataset("hf://acme/qa")


def test_a_missing_split_lists_the_files(hub: FakeHub) -> None:
    hub.add("data/train-00000-of-00001.jsonl", jsonl_bytes([{"input": "t"}]))
    with pytest.raises(DatasetError) as info:
        open_dataset("hf://acme/qa")
    message = str(info.value)
    assert "no data files for split 'test'" in message
    assert "data/train-00000-of-00001.jsonl" in message
    assert "@SPLIT" in message

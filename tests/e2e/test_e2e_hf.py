"""`hf://` datasets end to end, read offline from a Hugging Face hub cache built here."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CURRENT = "1111111111111111111111111111111111111111"
STALE = "2222222222222222222222222222222222222222"


def _parquet(path: Path, outputs: list[str], references: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "id": [f"q{i}" for i in range(len(outputs))],
            "input": [f"question {i}" for i in range(len(outputs))],
            "output": outputs,
            "reference": references,
        }
    )
    pq.write_table(table, path)


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    """``datasets--acme--qa`` with a current snapshot (refs/main) and a newer-looking stale one."""
    cache = tmp_path / "hub"
    repo = cache / "datasets--acme--qa"
    current = repo / "snapshots" / CURRENT / "data"
    _parquet(current / "test-00000-of-00001.parquet", ["a", "b", "c", "d"], ["a", "b", "c", "x"])
    _parquet(current / "train-00000-of-00001.parquet", ["a", "b"], ["a", "z"])
    _parquet(repo / "snapshots" / STALE / "data" / "test-00000-of-00001.parquet", ["a"], ["z"])
    stale_dir = repo / "snapshots" / STALE
    later = os.stat(current).st_mtime + 100
    os.utime(stale_dir, (later, later))  # newest on disk, but refs/main decides
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(CURRENT)
    return cache


def _eval(cli, json_out, hub: Path, uri: str) -> dict:
    return json_out(
        cli(
            "eval",
            "--data",
            uri,
            "--evaluators",
            "exact-match",
            "--format",
            "json",
            env={"HF_HUB_CACHE": str(hub)},
        )
    )


def test_hf_dataset_from_the_local_cache(cli, json_out, hub):
    out = _eval(cli, json_out, hub, "hf://acme/qa")
    assert out["records"] == 4
    (m,) = out["metrics"]
    assert (m["n"], m["mean"]) == (4, 0.75)
    assert out["dataset"]["source"] == "hf://acme/qa"
    version = out["dataset"]["version"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", version), version

    # Same content, same version; the stored run carries it too.
    again = _eval(cli, json_out, hub, "hf://acme/qa@test")
    assert again["dataset"]["version"] == version
    shown = json_out(cli("runs", "show", again["run_id"], "--format", "json"))
    assert shown["manifest"]["dataset"]["version"] == version

    train = _eval(cli, json_out, hub, "hf://acme/qa@train")
    assert (train["records"], train["metrics"][0]["mean"]) == (2, 0.5)
    assert train["dataset"]["version"] != version

    # Point refs/main at the other snapshot: other data, another version.
    (hub / "datasets--acme--qa" / "refs" / "main").write_text(STALE)
    stale = _eval(cli, json_out, hub, "hf://acme/qa")
    assert (stale["records"], stale["metrics"][0]["mean"]) == (1, 0.0)
    assert stale["dataset"]["version"] not in (version, train["dataset"]["version"])


def test_absent_hf_dataset_is_exit_2_with_an_offline_hint(cli, user_error, hub, tmp_path):
    proc = cli(
        "eval",
        "--data",
        "hf://acme/absent",
        "--evaluators",
        "exact-match",
        "--format",
        "json",
        env={"HF_HUB_CACHE": str(hub)},
    )
    err = user_error(proc, "hf://acme/absent", "acme/absent")
    assert "offline" in err
    assert "cache" in err
    assert "HF_HUB_CACHE" in err
    # A split that is not there names the split and lists what is.
    proc = cli(
        "eval",
        "--data",
        "hf://acme/qa@validation",
        "--evaluators",
        "exact-match",
        env={"HF_HUB_CACHE": str(hub)},
    )
    user_error(proc, "validation", "test-00000-of-00001.parquet")

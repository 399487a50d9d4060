"""One manifest type for every kind of run, and stored manifests of earlier builds still read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import evalsi
from evalsi.core import PER_TASK_SEED, VERSION, DatasetPin, RunManifest, Seeds, SourceRun

EVALUATOR = {"name": "exact-match", "ref": "builtin/exact-match@1.0.0", "version": "1.0.0"}

# What builds before the typed manifest stored, one per way in (copied from such stores).
OLD_SCORE = {
    "evalsi_version": "0.1.0", "spec_hash": "sha256:aa", "evaluators": [EVALUATOR],
    "dataset": {"source": "qa.jsonl", "version": "sha256:bb", "records": 20}, "seed": 3,
    "python": "3.11.7", "platform": "Linux", "created_at": 1.5, "unpinned": [],
    "isolation": [], "judges": {"default": {"model": "m"}},
}  # fmt: skip
OLD_RUN = {
    "evalsi_version": "0.1.0", "spec_hash": "sha256:cc", "spec_source": "run.yaml",
    "evaluators": [EVALUATOR],
    "dataset": {"source": "qa.jsonl", "version": "sha256:dd", "records": 5, "limit": 5},
    "target": {"kind": "model", "model": "stub"}, "trials": 3,
    "seeds": {"seed": 42, "per_task": PER_TASK_SEED, "passed_to_target": True},
    "sandbox": "none", "python": "3.11.7", "platform": "Linux", "created_at": 2.0,
    "unpinned": ["target"], "spec_document_hash": "sha256:ee", "isolation": [],
}  # fmt: skip
OLD_GRADE = {
    "evalsi_version": "0.1.0",
    "source_run": {"id": "r1", "spec_hash": "sha256:cc", "dataset_version": "sha256:dd"},
    "evaluators": [EVALUATOR], "dataset": {"source": "qa.jsonl", "version": None, "records": 5},
    "target": None, "trials": 1, "seeds": None, "python": "3.11.7", "platform": "Linux",
    "created_at": 3.0, "unpinned": [],
}  # fmt: skip


def test_a_score_manifest_of_an_earlier_build_reads_its_seed() -> None:
    m = RunManifest.from_dict(OLD_SCORE)
    assert m.seeds == Seeds(3)
    assert m.dataset == DatasetPin("qa.jsonl", "sha256:bb", 20)
    assert m.judges == {"default": {"model": "m"}}
    assert m.to_dict()["seeds"] == {"seed": 3}  # one shape from now on


def test_a_run_manifest_of_an_earlier_build_reads_whole() -> None:
    m = RunManifest.from_dict(OLD_RUN)
    assert m.seeds == Seeds(42, PER_TASK_SEED, True)
    assert (m.trials, m.dataset.limit, m.unpinned) == (3, 5, ("target",))
    assert m.to_dict() == OLD_RUN  # nothing lost, nothing added


def test_a_grade_manifest_of_an_earlier_build_reads_its_source_run() -> None:
    m = RunManifest.from_dict(OLD_GRADE)
    assert m.source_run == SourceRun("r1", "sha256:cc", "sha256:dd")
    assert (m.seeds, m.target, m.spec_hash) == (Seeds(0), None, None)


def test_capture_records_this_build() -> None:
    m = RunManifest.capture(
        spec_hash="sha256:ff", evaluators=[EVALUATOR], dataset=DatasetPin("x", None, 0)
    )
    assert m.evalsi_version == VERSION == evalsi.__version__
    assert m.python
    assert m.platform
    assert m.created_at > 0
    done = m.finished(isolation=[{"evaluator": "e", "level": "process"}], judges={})
    assert done.judges is None  # no judges: the key is left out
    assert "judges" not in done.to_dict()
    assert done.to_dict()["isolation"] == [{"evaluator": "e", "level": "process"}]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=8),
    lambda inner: st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@given(
    seed=st.integers(0, 2**31),
    records=st.integers(0, 10**9),
    trials=st.integers(1, 100),
    target=st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
    limit=st.none() | st.integers(1, 10**6),
)
def test_round_trip_through_json(
    seed: int, records: int, trials: int, target: dict[str, Any] | None, limit: int | None
) -> None:
    m = RunManifest.capture(
        spec_hash="sha256:ab",
        evaluators=[EVALUATOR],
        dataset=DatasetPin("d", "sha256:cd", records, limit),
        seeds=Seeds(seed),
        trials=trials,
        target=target,
    )
    assert RunManifest.from_dict(json.loads(json.dumps(m.to_dict()))) == m


@pytest.mark.parametrize("old", [OLD_SCORE, OLD_RUN, OLD_GRADE])
def test_every_old_shape_round_trips_after_reading(old: dict[str, Any]) -> None:
    once = RunManifest.from_dict(old)
    assert RunManifest.from_dict(once.to_dict()) == once

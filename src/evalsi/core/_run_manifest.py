"""``RunManifest``: what a stored run needs to be reproduced, one shape for every kind of run.

Score, Run, grade, the server's Evaluate and online policies all store this shape; earlier
builds stored four variants (a score run said ``seed``, a Run ``seeds``, a grade named its
source run), and ``RunManifest.from_dict`` reads every one of them.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from evalsi.core._hashing import code_sha256

VERSION = "0.1.0"
"""evalsi's version (``evalsi.__version__``), recorded in every manifest."""

PER_TASK_SEED = "blake2b(seed, sample id, trial) & 0x7fffffff"
"""How a Run derives each task's seed from the spec's (``runs.task_seed``)."""

_PYTHON = sys.version.split()[0]
_PLATFORM = platform.platform()


@dataclass(frozen=True, slots=True)
class DatasetPin:
    """The data a run read: where, its content hash, how many records (and a Run's limit)."""

    source: str
    version: str | None
    records: int
    limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "limit" or v is not None}


@dataclass(frozen=True, slots=True)
class Seeds:
    """The seed a run was given, and for a Run how tasks derive theirs and whether the target
    took it."""

    seed: int = 0
    per_task: str | None = None
    passed_to_target: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class SourceRun:
    """The Run whose stored outputs a grade run graded."""

    id: str
    spec_hash: str | None
    dataset_version: str | None


@dataclass(frozen=True, slots=True)
class RunManifest:
    """What a run was: code version, spec, evaluators, data, target, seeds, environment.

    Build one with ``RunManifest.capture`` (it fills the version, Python, platform and time)
    and store ``to_dict()``; read a stored one, of this build or an earlier one, with
    ``from_dict``.

    Example:
        >>> m = RunManifest.capture(
        ...     spec_hash="sha256:ab", evaluators=[], dataset=DatasetPin("qa.jsonl", None, 3)
        ... )
        >>> RunManifest.from_dict(m.to_dict()) == m
        True
        >>> RunManifest.from_dict({**m.to_dict(), "seeds": None, "seed": 7}).seeds.seed
        7
    """

    evalsi_version: str
    spec_hash: str | None
    evaluators: tuple[Mapping[str, Any], ...]
    dataset: DatasetPin
    python: str
    platform: str
    created_at: float
    seeds: Seeds = field(default_factory=Seeds)
    trials: int = 1
    target: Mapping[str, Any] | None = None
    unpinned: tuple[str, ...] = ()
    spec_source: str | None = None
    spec_document_hash: str | None = None
    source_run: SourceRun | None = None
    isolation: tuple[Mapping[str, Any], ...] = ()
    judges: Mapping[str, Any] | None = None
    sandbox: str = "none"
    """How the target ran: ``none`` (in the harness's process or over the network)."""
    code_sha256: str | None = None
    """The evaluating code (``core.code_sha256``), recorded when the run ends."""

    @classmethod
    def capture(
        cls,
        *,
        spec_hash: str | None,
        evaluators: Sequence[Mapping[str, Any]],
        dataset: DatasetPin,
        **rest: Any,
    ) -> RunManifest:
        """A manifest of a run of this build, on this machine, now."""
        return cls(
            evalsi_version=VERSION,
            spec_hash=spec_hash,
            evaluators=tuple(evaluators),
            dataset=dataset,
            python=_PYTHON,
            platform=_PLATFORM,
            created_at=time.time(),
            **rest,
        )

    def finished(
        self,
        *,
        isolation: Sequence[Mapping[str, Any]] = (),
        judges: Mapping[str, Any] | None = None,
    ) -> RunManifest:
        """This manifest with what is known only at the end: how sandboxed evaluators were
        confined, and the judges' models and settings."""
        return replace(
            self, isolation=tuple(isolation), judges=judges or None, code_sha256=code_sha256()
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form; optional parts are left out when unset."""
        out: dict[str, Any] = {
            "evalsi_version": self.evalsi_version,
            "spec_hash": self.spec_hash,
            "evaluators": [dict(e) for e in self.evaluators],
            "dataset": self.dataset.to_dict(),
            "trials": self.trials,
            "seeds": self.seeds.to_dict(),
            "python": self.python,
            "platform": self.platform,
            "created_at": self.created_at,
            "unpinned": list(self.unpinned),
            "isolation": [dict(i) for i in self.isolation],
            "sandbox": self.sandbox,
        }
        optional: dict[str, Any] = {
            "target": None if self.target is None else dict(self.target),
            "spec_source": self.spec_source,
            "spec_document_hash": self.spec_document_hash,
            "judges": None if self.judges is None else dict(self.judges),
            "source_run": None if self.source_run is None else asdict(self.source_run),
            "code_sha256": self.code_sha256,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunManifest:
        """A stored manifest, of this build or an earlier one: score runs and the server's
        Evaluate once stored ``seed`` (an int) where a Run stored ``seeds``; a grade run's
        ``seeds`` could be null; ``isolation`` and ``trials`` were not always there."""
        seeds = data.get("seeds")
        if isinstance(seeds, Mapping):
            seed = Seeds(
                seed=int(seeds.get("seed", 0)),
                per_task=seeds.get("per_task"),
                passed_to_target=seeds.get("passed_to_target"),
            )
        else:
            seed = Seeds(seed=int(data.get("seed") or 0))
        d = data.get("dataset") or {}
        source = data.get("source_run")
        return cls(
            evalsi_version=str(data.get("evalsi_version", "")),
            spec_hash=data.get("spec_hash"),
            evaluators=tuple(data.get("evaluators") or ()),
            dataset=DatasetPin(
                source=str(d.get("source", "")),
                version=d.get("version"),
                records=int(d.get("records") or 0),
                limit=d.get("limit"),
            ),
            python=str(data.get("python", "")),
            platform=str(data.get("platform", "")),
            created_at=float(data.get("created_at") or 0.0),
            seeds=seed,
            trials=int(data.get("trials") or 1),
            target=data.get("target"),
            unpinned=tuple(data.get("unpinned") or ()),
            spec_source=data.get("spec_source"),
            spec_document_hash=data.get("spec_document_hash"),
            source_run=None
            if not isinstance(source, Mapping)
            else SourceRun(
                id=str(source.get("id", "")),
                spec_hash=source.get("spec_hash"),
                dataset_version=source.get("dataset_version"),
            ),
            isolation=tuple(data.get("isolation") or ()),
            judges=data.get("judges"),
            sandbox=str(data.get("sandbox") or "none"),
            code_sha256=data.get("code_sha256"),
        )

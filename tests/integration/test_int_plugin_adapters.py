"""Adapters through the plugin runtime: Inspect's scorers served by the
examples/plugins/inspect-scorers plugin in a process of its own (python -m evalsi.plugins)
give exactly Inspect's verdicts on the same samples."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelName, ModelOutput
from inspect_ai.scorer import CORRECT, Target, exact, f1, includes, match
from inspect_ai.solver import TaskState

import evalsi
from evalsi.evaluators import Registry
from tests.support.plugins import install_to_folder, started_plugin

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "plugins" / "inspect-scorers"
SAMPLES = [  # (answer, target)
    ("Paris", "paris"),
    ("It is Paris.", "Paris"),
    ("5", "4"),
    ("The answer is 4", "4"),
    ("the quick brown fox", "quick brown dog"),
]


@pytest.fixture(scope="module")
def inspect_plugin(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The plugin package on a folder of its own (inspect-ai itself from this interpreter: a
    venv of its own is what `evalsi plugin install` builds, test_e2e_plugin_venv.py)."""
    site = install_to_folder(
        PACKAGE, tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("build")
    )
    host, registry = started_plugin(PACKAGE, "inspect", site)
    yield registry
    host.close()


async def _direct(scorer: Any) -> list[Any]:
    out = []
    for i, (answer, target) in enumerate(SAMPLES):
        state = TaskState(
            model=ModelName("mockllm/model"),
            sample_id=i,
            epoch=1,
            input="q",
            messages=[],
            target=Target(target),
            output=ModelOutput.from_content("mockllm/model", answer),
        )
        out.append(await scorer(state, Target(target)))
    return out


@pytest.mark.parametrize(
    ("name", "make"), [("includes", includes), ("match", match), ("exact", exact), ("f1", f1)]
)
def test_inspect_scorers_in_a_plugin_score_as_inspect_does(
    inspect_plugin: Registry, name: str, make: Any
) -> None:
    direct = asyncio.run(_direct(make()))
    rows = [{"id": str(i), "output": a, "reference": t} for i, (a, t) in enumerate(SAMPLES)]
    out = evalsi.evaluate(
        rows, evaluators=[f"inspect/{name}"], registry=inspect_plugin, store=":memory:"
    )
    got = [r.scores[0] for r in out.results]
    if name == "f1":
        assert [s.number for s in got] == [d.value for d in direct]
    else:
        assert [s.passed for s in got] == [d.value == CORRECT for d in direct]
    assert [s.explanation for s in got] == [d.explanation or "" for d in direct]

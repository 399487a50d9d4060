"""The ml-monitoring guide works as written: each `evalsi eval` command in
docs/guides/packs/ml-monitoring.md runs on examples/ml-monitoring/ (with `--format json`), and
its numbers equal scipy's and fairlearn's computed here from the same files; the Python
example runs too.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "ml-monitoring.md"
EXAMPLES = ROOT / "examples" / "ml-monitoring"


def guide_commands() -> list[str]:
    """Every `$ evalsi …` command of the guide's console blocks, continuation lines joined."""
    commands: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ evalsi "):
                parts = [lines[i][2:]]
                while parts[-1].endswith("\\"):
                    i += 1
                    parts[-1] = parts[-1][:-1]
                    parts.append(lines[i])
                commands.append(" ".join(p.strip() for p in parts))
            i += 1
    return commands


COMMANDS = guide_commands()


def command_with(*evaluators: str) -> str:
    for cmd in COMMANDS:
        if f"--evaluators {','.join(evaluators)}" in cmd:
            return cmd
    raise AssertionError(f"the guide has no command for {evaluators}")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples" / "ml-monitoring")
    return tmp_path


def run_json(
    run_evalsi: Callable[..., subprocess.CompletedProcess[str]], cwd: Path, command: str
) -> tuple[int, dict[str, float | None], dict[str, Any]]:
    args = shlex.split(command)[1:]
    if "--format" not in args:
        args += ["--format", "json"]
    proc = run_evalsi(cwd, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    metrics = {f"{m['evaluator']}/{m['metric']}": m["mean"] for m in out["metrics"]}
    return proc.returncode, metrics, out


def rows(name: str) -> list[dict[str, Any]]:
    with (EXAMPLES / f"{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def numbers(data: list[dict[str, Any]], feature: str) -> np.ndarray:
    values = [r["input"][feature] for r in data]
    return np.array([v for v in values if isinstance(v, (int, float))], dtype=float)


def shares(ref: np.ndarray, cur: np.ndarray, bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    edges = np.unique(np.quantile(ref, np.arange(1, bins) / bins, method="inverted_cdf"))
    assert not (edges == ref.max()).all()  # no collapsed feature in the example data
    cuts = [-np.inf, *edges.tolist(), np.inf]
    r = pd.cut(pd.Series(ref), cuts).value_counts(sort=False).to_numpy() / ref.size
    c = pd.cut(pd.Series(cur), cuts).value_counts(sort=False).to_numpy() / cur.size
    return r, c


def psi_of(r: np.ndarray, c: np.ndarray, eps: float = 1e-4) -> float:
    r, c = np.where(r == 0, eps, r), np.where(c == 0, eps, c)
    return float(np.sum((c - r) * np.log(c / r)))


REF, CUR = rows("reference"), rows("current")
NUMERIC = ["age", "bmi", "bp", "s5"]


def test_the_guide_has_the_commands_this_test_checks() -> None:
    assert len(COMMANDS) == 5
    assert all(
        c.startswith("evalsi eval --data examples/ml-monitoring/current.jsonl") for c in COMMANDS
    )


def test_psi_command(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    code, m, _ = run_json(run_evalsi, workdir, command_with("psi"))
    assert code == 0
    expected = {f: psi_of(*shares(numbers(REF, f), numbers(CUR, f))) for f in NUMERIC}
    rc = Counter(str(r["input"]["sex"]) for r in REF)
    cc = Counter(str(r["input"]["sex"]) for r in CUR)
    r = np.array([rc[k] / len(REF) for k in sorted(rc)])
    c = np.array([cc[k] / len(CUR) for k in sorted(rc)])
    expected["sex"] = psi_of(r, c)
    for feature, value in expected.items():
        assert m[f"psi/psi[{feature}]"] == pytest.approx(value, abs=1e-12), feature
    assert m["psi/psi"] == pytest.approx(max(expected.values()), abs=1e-12)
    assert m["psi/drifted-share"] == pytest.approx(sum(v >= 0.2 for v in expected.values()) / 5)
    assert m["psi/no-drift"] == 0.0


def test_js_and_ks_command(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    code, m, _ = run_json(run_evalsi, workdir, command_with("js-distance", "ks"))
    assert code == 0
    for feature in NUMERIC:
        ref, cur = numbers(REF, feature), numbers(CUR, feature)
        js = float(jensenshannon(*shares(ref, cur), base=2))
        assert m[f"js-distance/js-distance[{feature}]"] == pytest.approx(js, abs=1e-12)
        res = ks_2samp(ref, cur)
        assert m[f"ks/ks[{feature}]"] == float(res.statistic)
        assert m[f"ks/p-value[{feature}]"] == float(res.pvalue)
    assert "ks/ks[sex]" not in m  # the command names the numerical features only
    assert m["ks/drifted-share"] == pytest.approx(0.25)  # bmi only


def test_quality_command(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    code, m, _ = run_json(run_evalsi, workdir, command_with("missing-rate", "type-violations"))
    assert code == 0
    n = len(CUR)
    bp = [r["input"]["bp"] for r in CUR]
    age = [r["input"]["age"] for r in CUR]
    assert m["missing-rate/missing-rate[bp]"] == pytest.approx(bp.count(None) / n)
    assert m["missing-rate/missing-rate"] == pytest.approx(bp.count(None) / n)
    assert m["type-violations/type-violations[age]"] == pytest.approx(
        sum(isinstance(a, str) for a in age) / n
    )
    readings = np.array([v for v in bp if v is not None])
    out = ((readings < 40) | (readings > 250)).mean()
    assert out > 0
    assert m["out-of-range/out-of-range[bp]"] == pytest.approx(out)
    assert m["out-of-range/out-of-range"] == pytest.approx(out)


def test_fairness_command(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    command = command_with("demographic-parity-difference", "equalized-odds-difference")
    code, m, _ = run_json(run_evalsi, workdir, command)
    assert code == 0
    y = np.array([r["reference"] for r in CUR])
    pred = np.array([r["output"] for r in CUR])
    sex = np.array([r["input"]["sex"] for r in CUR])
    dp = demographic_parity_difference(y, pred, sensitive_features=sex)
    eo = equalized_odds_difference(y, pred, sensitive_features=sex)
    assert m["demographic-parity-difference/demographic-parity-difference"] == pytest.approx(
        dp, abs=1e-12
    )
    assert m["equalized-odds-difference/equalized-odds-difference"] == pytest.approx(eo, abs=1e-12)
    for g in (1, 2):
        assert m[f"demographic-parity-difference/selection-rate[{g}]"] == pytest.approx(
            pred[sex == g].mean()
        )


def test_gate_command_fails_on_drift(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    command = next(c for c in COMMANDS if "--gate" in c)
    code, m, out = run_json(run_evalsi, workdir, command)
    assert code == 1
    assert [g["verdict"] for g in out["gates"]] == ["failed"]
    assert m["psi/no-drift"] == 0.0


def test_the_python_example_runs(workdir: Path) -> None:
    text = GUIDE.read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    psi_bmi = psi_of(*shares(numbers(REF, "bmi"), numbers(CUR, "bmi")))
    assert lines[-2].split() == [repr(psi_bmi), "0.0"]
    assert "'drifted': True" in lines[-1]

"""Statistics through the CLI, checked against statsmodels and scipy (never against evalsi).

Thousands of seeded records go through `evalsi eval --format json`; the reported mean, n and
interval must equal the reference implementations to 1e-9.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

N = 3000
TOPICS = 30
PASS_RATE = 0.7
TOL = 1e-9


def _metric(out: dict[str, Any], evaluator: str, metric: str | None = None) -> dict[str, Any]:
    found = [
        m
        for m in out["metrics"]
        if m["evaluator"] == evaluator and m["metric"] == (metric or evaluator)
    ]
    assert len(found) == 1, out["metrics"]
    return found[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Any]:
    """Seeded records: pass/fail at ~70%, latencies with a per-topic effect, 30 topics."""
    rng = random.Random(20261129)
    root = tmp_path_factory.mktemp("stats")
    effects = [rng.gauss(0.0, 40.0) for _ in range(TOPICS)]
    rows, passed, latency, topic = [], [], [], []
    for i in range(N):
        t = rng.randrange(TOPICS)
        ok = rng.random() < PASS_RATE
        ms = max(1.0, 250.0 + effects[t] + rng.gauss(0.0, 60.0))
        rows.append(
            {
                "id": f"s{i}",
                "output": "right" if ok else "wrong",
                "reference": "right",
                "usage": {"latency_ms": ms},
                "metadata": {"topic": f"topic-{t}"},
            }
        )
        passed.append(ok)
        latency.append(ms)
        topic.append(t)
    with (root / "stats.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return {
        "root": root,
        "passed": np.array(passed, dtype=float),
        "latency": np.array(latency),
        "topic": np.array(topic),
    }


@pytest.fixture(scope="module")
def plain(dataset, run_evalsi) -> dict[str, Any]:
    proc = run_evalsi(
        dataset["root"],
        "eval",
        "--data",
        "stats.jsonl",
        "--evaluators",
        "exact-match,latency",
        "--format",
        "json",
        "--store",
        "plain.db",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def clustered(dataset, run_evalsi) -> dict[str, Any]:
    proc = run_evalsi(
        dataset["root"],
        "eval",
        "--data",
        "stats.jsonl",
        "--evaluators",
        "exact-match,latency",
        "--cluster-by",
        "topic",
        "--format",
        "json",
        "--store",
        "clustered.db",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_exact_match_matches_statsmodels_wilson(dataset, plain):
    count = int(dataset["passed"].sum())
    m = _metric(plain, "exact-match")
    assert plain["records"] == N
    assert m["n"] == N
    assert m["mean"] == pytest.approx(count / N, abs=TOL)
    lo, hi = proportion_confint(count, N, alpha=0.05, method="wilson")
    assert m["ci_method"] == "wilson"
    assert m["ci"][0] == pytest.approx(lo, abs=TOL)
    assert m["ci"][1] == pytest.approx(hi, abs=TOL)
    # The seed gives a pass rate near the one asked for: the data really is what we think.
    assert abs(count / N - PASS_RATE) < 0.03


def test_latency_matches_scipy_t_interval(dataset, plain):
    x = dataset["latency"]
    m = _metric(plain, "latency")
    assert m["n"] == N
    assert m["mean"] == pytest.approx(float(x.mean()), abs=TOL)
    lo, hi = stats.t.interval(0.95, N - 1, loc=x.mean(), scale=stats.sem(x))
    assert m["ci_method"] == "t"
    assert m["ci"][0] == pytest.approx(lo, abs=TOL)
    assert m["ci"][1] == pytest.approx(hi, abs=TOL)
    assert m["std"] == pytest.approx(float(x.std(ddof=1)), abs=TOL)


def _statsmodels_cluster(values: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    fit = sm.OLS(values, np.ones(len(values))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    lo, hi = fit.conf_int(alpha=0.05)[0]
    return float(lo), float(hi)


def test_cluster_by_topic_matches_statsmodels_ols_cluster(dataset, clustered, plain):
    x, groups = dataset["latency"], dataset["topic"]
    m = _metric(clustered, "latency")
    lo, hi = _statsmodels_cluster(x, groups)
    assert m["n"] == N
    assert m["mean"] == pytest.approx(float(x.mean()), abs=TOL)
    assert m["ci_method"] == "cluster-t"
    assert m["clusters"] == len(set(groups.tolist()))
    assert m["ci"][0] == pytest.approx(lo, abs=TOL)
    assert m["ci"][1] == pytest.approx(hi, abs=TOL)
    # With a real topic effect the clustered interval is wider than the plain t interval.
    plain_lat = _metric(plain, "latency")
    assert hi - lo > plain_lat["ci"][1] - plain_lat["ci"][0]


def _cluster_wilson_reference(y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """The documented cluster-wilson, from statsmodels' cluster-robust variance and intervals.

    deff = CR1 variance / binomial variance, kept in [1, Σn_g²/N], and Σn_g²/N when either
    outcome shows in fewer than 5 clusters; n_eff = N/deff·(z/t_{G-1})²; Wilson on
    (p·n_eff, n_eff), widened to Clopper-Pearson with at most 10 successes or failures.
    """
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    robust = float(fit.bse[0]) ** 2
    n, p = len(y), float(y.mean())
    labels = np.unique(groups)
    sizes = np.array([np.sum(groups == g) for g in labels])
    sums = np.array([y[groups == g].sum() for g in labels])
    most = float(np.sum(sizes**2)) / n
    both = min(int(np.sum(sums > 0)), int(np.sum(sums < sizes)))
    deff = robust / (p * (1 - p) / n) if both >= 5 and 0 < p < 1 else most
    deff = min(max(deff, 1.0), most)
    g = len(labels)
    n_eff = n / deff * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, g - 1)) ** 2
    x = p * n_eff
    low, high = proportion_confint(x, n_eff, method="wilson")
    if min(x, n_eff - x) <= 10:
        exact_low, exact_high = proportion_confint(x, n_eff, method="beta")
        low, high = min(low, exact_low), max(high, exact_high)
    return float(low), float(high)


def test_cluster_by_topic_on_pass_fail_is_cluster_wilson(dataset, clustered, plain):
    y, groups = dataset["passed"].astype(float), dataset["topic"]
    m = _metric(clustered, "exact-match")
    lo, hi = _cluster_wilson_reference(y, groups)
    assert m["ci_method"] == "cluster-wilson"
    assert m["ci"][0] == pytest.approx(lo, abs=TOL)
    assert m["ci"][1] == pytest.approx(hi, abs=TOL)
    # Never narrower than the records taken as independent.
    unclustered = _metric(plain, "exact-match")["ci"]
    assert m["ci"][0] <= unclustered[0]
    assert m["ci"][1] >= unclustered[1]


def test_few_clusters_pass_fail_interval_counts_clusters_not_records(
    cli, write_jsonl, json_out, tmp_path
):
    """3 topics, one failure: the data cannot tell the correlation, so each topic counts once."""
    rows = []
    for i in range(60):
        ok = i != 7
        rows.append({"output": "a" if ok else "b", "reference": "a", "metadata": {"topic": i % 3}})
    write_jsonl(tmp_path / "few.jsonl", rows)
    y = np.array([1.0 if i != 7 else 0.0 for i in range(60)])
    lo, _ = _cluster_wilson_reference(y, np.array([i % 3 for i in range(60)]))
    out = json_out(
        cli(
            "eval",
            "--data",
            "few.jsonl",
            "--evaluators",
            "exact-match",
            "--cluster-by",
            "topic",
            "--format",
            "json",
        )
    )
    m = _metric(out, "exact-match")
    assert m["ci_method"] == "cluster-wilson"
    assert m["ci"] == [pytest.approx(lo, abs=TOL), 1.0]
    assert m["ci"][0] < 0.5  # 3 clusters say little, however many records they hold
    assert m["clusters"] == 3


def test_skipped_records_are_out_of_n_and_mean(cli, write_jsonl, json_out, tmp_path):
    """Records without a reference are SKIPPED by exact-match: counted beside n, not in it."""
    rng = random.Random(7)
    rows, passes, scored, skipped = [], 0, 0, 0
    for i in range(400):
        row: dict[str, Any] = {"id": str(i), "output": "x"}
        if i % 5 == 0:
            skipped += 1  # no reference at all
        else:
            ok = rng.random() < 0.4
            row["reference"] = "x" if ok else "y"
            passes += ok
            scored += 1
        rows.append(row)
    write_jsonl(tmp_path / "skips.jsonl", rows)
    out = json_out(
        cli(
            "eval",
            "--data",
            "skips.jsonl",
            "--evaluators",
            "exact-match,length",
            "--format",
            "json",
        )
    )
    m = _metric(out, "exact-match")
    assert out["records"] == 400
    assert (m["n"], m["scored"], m["skipped"], m["errors"]) == (scored, scored, skipped, 0)
    assert m["mean"] == pytest.approx(passes / scored, abs=TOL)
    lo, hi = proportion_confint(passes, scored, method="wilson")
    assert m["ci"] == [pytest.approx(lo, abs=TOL), pytest.approx(hi, abs=TOL)]
    # An evaluator that needs only the output scores every record of the same run.
    length = _metric(out, "length")
    assert (length["n"], length["skipped"]) == (400, 0)
    assert not math.isnan(length["mean"])

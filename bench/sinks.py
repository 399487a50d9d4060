"""Sinks: a 100,000-record run exported to a real MLflow server and to a real S3 API (moto), and
a run with and without a sink.

    python bench/sinks.py                      # 100,000 records, 3 rounds
    python bench/sinks.py --records 20000 --rounds 2

Setup, once: an ``evalsi eval`` of ``--records`` records with ``exact-match`` (one score a
record) stored in a fresh store; an MLflow tracking server (``.tools/mlflow``, sqlite backend,
artifacts proxied) and ``moto_server`` on loopback ports.

Each round, interleaved (the order is reversed every other round):

- **export to MLflow / to S3**, in process (``export_run``): scores/s;
- **export, whole process** (``evalsi export RUN --to s3://...`` and ``--to mlflow:...``, spawn
  to exit: the import of boto3 or MLflow's client counted): scores/s;
- **a run without and with a sink** (``--run-samples`` samples, a Python target, exact-match):
  the run's own duration (created to finished, as the store records it) and the command's whole
  duration, which with a sink includes sending (the export starts once the results are stored).

Medians and [min-max] ranges; targets (issue 22): >= 5,000 scores/s to each sink; the run
slowed by <= 5 % with a sink on. Results go to ``bench/out/sinks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
MLFLOW = ROOT / ".tools" / "mlflow" / "bin" / "mlflow"
EVALSI = str(Path(sys.executable).with_name("evalsi"))
TARGET = "def answer(input):\n    return input.upper()\n"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(url: str, proc: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} never answered")


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_spec(work: Path, sinks: list[dict[str, Any]]) -> Path:
    doc = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "sinks-bench"},
        "spec": {
            "target": {"python": "bench_target:answer"},
            "dataset": {"path": "run.jsonl"},
            "evaluators": [{"ref": "exact-match"}],
            "maxConcurrency": 64,
            **({"sinks": sinks} if sinks else {}),
        },
    }
    path = work / ("with-sink.yaml" if sinks else "without.yaml")
    path.write_text(json.dumps(doc))
    return path


def timed_run(work: Path, spec: Path, env: dict[str, str]) -> tuple[float, float]:
    """(the run's own seconds, the command's seconds)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [EVALSI, "run", "-f", str(spec), "--format", "json", "--store", str(work / "runs.db")],
        cwd=work, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    whole = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"evalsi run failed: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    for export in out.get("exports", []):
        if not export["ok"]:
            raise SystemExit(f"a sink failed: {export}")
    from evalsi.store import SqlStore

    db = SqlStore.open(str(work / "runs.db"))
    try:
        info = db.get_run(out["run_id"])
        own = float(info.finished_at or 0) - float(info.created_at)
    finally:
        db.close()
    return own, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--run-samples", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=OUT / "sinks.json")
    args = parser.parse_args()
    if not MLFLOW.exists():
        raise SystemExit(f"no MLflow server at {MLFLOW}: see .ci/run")

    from evalsi.runs import export_run
    from evalsi.specs import SinkSpec
    from evalsi.store import SqlStore

    work = Path(tempfile.mkdtemp(prefix="evalsi-sinks-bench-"))
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(work),
    }
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    (work / "bench_target.py").write_text(TARGET)
    data = work / "records.jsonl"
    with data.open("wb") as f:
        for i in range(args.records):
            answer = "yes" if i % 4 else "no"
            f.write(orjson.dumps({"id": f"r{i}", "output": answer, "reference": "yes"}) + b"\n")
    with (work / "run.jsonl").open("wb") as f:
        for i in range(args.run_samples):
            f.write(orjson.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"Q{i}"}) + b"\n")

    mlflow_port, s3_port = free_port(), free_port()
    mlflow = subprocess.Popen(
        [str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(mlflow_port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{work}/mlflow.db",
         "--artifacts-destination", str(work / "mlartifacts")],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-p", str(s3_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    s3_url, mlflow_url = f"http://127.0.0.1:{s3_port}", f"http://127.0.0.1:{mlflow_port}"
    try:
        wait(s3_url, moto)
        wait(mlflow_url + "/health", mlflow)
        import boto3

        boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1").create_bucket(
            Bucket="evals"
        )
        store = work / "evals.db"
        import evalsi

        scored = evalsi.evaluate(str(data), ["exact-match"], store=str(store))
        run_id = scored.run_id
        db = SqlStore.open(str(store))
        mlflow_sink = SinkSpec("mlflow", {"trackingUri": mlflow_url, "experiment": "bench"})
        s3_sink = SinkSpec("s3", {"bucket": "evals", "endpointUrl": s3_url, "region": "us-east-1"})
        with_sink = run_spec(work, [{"s3": dict(s3_sink.options, prefix="runs")}])
        without = run_spec(work, [])
        rates: dict[str, list[float]] = {
            "mlflow": [], "s3": [], "s3_whole_process": [], "mlflow_whole_process": []
        }  # fmt: skip
        runs: dict[str, list[float]] = {
            "without_own": [], "with_own": [], "without_whole": [], "with_whole": []
        }  # fmt: skip
        for r in range(args.rounds):
            order = ["mlflow", "s3", "s3_whole_process", "mlflow_whole_process", "runs"]
            for which in order if r % 2 == 0 else list(reversed(order)):
                if which == "runs":
                    pairs = [("without", without), ("with", with_sink)]
                    for name, spec in pairs if r % 2 == 0 else list(reversed(pairs)):
                        own, whole = timed_run(work, spec, env)
                        runs[f"{name}_own"].append(own)
                        runs[f"{name}_whole"].append(whole)
                    continue
                started = time.perf_counter()
                if which.endswith("_whole_process"):
                    dest = "s3://evals/whole" if which.startswith("s3") else f"mlflow:{mlflow_url}"
                    proc = subprocess.run(
                        [EVALSI, "export", run_id, "--to", dest, "--store", str(store)],
                        env={**env, "AWS_ENDPOINT_URL": s3_url}, capture_output=True,
                        text=True, check=False,
                    )  # fmt: skip
                    if proc.returncode != 0:
                        raise SystemExit(f"evalsi export failed: {proc.stderr[-2000:]}")
                else:
                    sink = mlflow_sink if which == "mlflow" else s3_sink
                    (done,) = export_run(db, run_id, [sink])
                    if done.receipt is None:
                        raise SystemExit(f"{which}: {done.error}")
                    assert done.receipt["rows"] == args.records, done.receipt
                rates[which].append(args.records / (time.perf_counter() - started))
            print(
                f"round {r + 1}: mlflow {rates['mlflow'][-1]:,.0f} scores/s, s3 "
                f"{rates['s3'][-1]:,.0f}; whole process: s3 {rates['s3_whole_process'][-1]:,.0f}, "
                f"mlflow {rates['mlflow_whole_process'][-1]:,.0f}; "
                f"run {runs['without_own'][-1]:.2f}s without a sink, "
                f"{runs['with_own'][-1]:.2f}s with (whole command "
                f"{runs['without_whole'][-1]:.2f}s / {runs['with_whole'][-1]:.2f}s)",
                flush=True,
            )
        db.close()
    finally:
        mlflow.terminate()
        moto.kill()
        mlflow.wait(timeout=30)
    slowdown = [w / o - 1 for w, o in zip(runs["with_own"], runs["without_own"], strict=True)]
    whole = [w / o - 1 for w, o in zip(runs["with_whole"], runs["without_whole"], strict=True)]
    out = {
        "records": args.records,
        "run_samples": args.run_samples,
        "scores_per_s": {k: summary(v) for k, v in rates.items()},
        "run_seconds": {k: summary(v) for k, v in runs.items()},
        "run_slowdown": summary(slowdown),
        "command_slowdown": summary(whole),
        "target_scores_per_s": 5000,
        "target_slowdown": 0.05,
        "met": {
            "mlflow": statistics.median(rates["mlflow"]) >= 5000,
            "s3": statistics.median(rates["s3"]) >= 5000,
            "run_slowdown": statistics.median(slowdown) <= 0.05,
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

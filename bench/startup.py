"""Start-up: a whole ``evalsi eval`` process on 20 records against baselines, in one run.

    python bench/startup.py                  # 7 rounds
    python bench/startup.py --rounds 15

Each round runs, in turn (A B C A B C ..., so machine load hits all three alike):

- ``python -c pass``: the interpreter alone;
- raw: a hand-written script doing the same work with orjson and sqlite3 (read the JSONL,
  compare output to reference, insert one row per record, print the mean);
- evalsi: ``evalsi eval --data <20 records> --evaluators exact-match`` on a fresh SQLite store.

Reports the median and range of each, wall clock from spawn to exit. Target (issue 16): evalsi
reaches its first record within 0.5 s of the process starting; its whole run is reported against
the raw script. Results go to ``bench/out/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAW = """
import sqlite3, sys, orjson
rows = [orjson.loads(line) for line in open(sys.argv[1], "rb")]
db = sqlite3.connect(sys.argv[2])
db.execute("create table if not exists r (id text, score real)")
scores = [(r["id"], float(r["output"] == r["reference"])) for r in rows]
db.executemany("insert into r values (?, ?)", scores)
db.commit()
print(sum(s for _, s in scores) / len(scores))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    evalsi = str(Path(sys.executable).with_name("evalsi"))
    with tempfile.TemporaryDirectory(prefix="evalsi-startup-") as tmp:
        data = Path(tmp) / "qa.jsonl"
        data.write_text(
            "".join(
                json.dumps(
                    {"id": str(i), "output": "Paris", "reference": "Paris" if i % 2 else "x"}
                )
                + "\n"
                for i in range(20)
            )
        )
        commands = {
            "python -c pass": lambda n: [sys.executable, "-c", "pass"],
            "raw orjson+sqlite3": lambda n: [
                sys.executable, "-c", RAW, str(data), f"{tmp}/raw{n}.db"
            ],
            "evalsi eval": lambda n: [
                evalsi, "eval", "--data", str(data), "--evaluators", "exact-match",
                "--store", f"{tmp}/evalsi{n}.db",
            ],
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in commands}
        for n in range(args.rounds):
            for name, command in commands.items():
                start = time.perf_counter()
                subprocess.run(command(n), check=True, capture_output=True, cwd=tmp)
                times[name].append(time.perf_counter() - start)
    result = {
        name: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t)}
        for name, t in times.items()
    }
    raw = result["raw orjson+sqlite3"]["median_s"]
    for name, r in result.items():
        print(
            f"{name:20s} median {r['median_s']:.3f} s  range {r['min_s']:.3f}-{r['max_s']:.3f} s"
            f"  ({r['median_s'] / raw:.1f}x raw)"
        )
    out = Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    (out / "startup.json").write_text(json.dumps({"rounds": args.rounds, **result}, indent=2))


if __name__ == "__main__":
    main()

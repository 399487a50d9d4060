"""Start-up (issue 16): a command imports what it uses. Package faces resolve every export on
first use, and a Score run from the CLI never imports calibration, Run specs, the server or the
client, and SciPy waits for the first interval."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalsi.core import lazy_module

LAZY_PACKAGES = ["evalsi.runs", "evalsi.stats", "evalsi.store"]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_export_of_a_lazy_package_resolves(name: str) -> None:
    package = importlib.import_module(name)
    for export in package.__all__:
        value = getattr(package, export)
        assert value is getattr(package, export)  # cached on the package after the first read
    with pytest.raises(AttributeError, match="no attribute 'not_an_export'"):
        package.not_an_export  # noqa: B018


def test_a_submodule_is_still_importable_through_the_face() -> None:
    from evalsi.runs import _score  # not an export: Python falls back to the submodule

    assert _score.__name__ == "evalsi.runs._score"


def test_lazy_module_imports_on_first_attribute() -> None:
    probe = "import sys; from evalsi.core import lazy_module; m = lazy_module('fractions'); "
    code = probe + "print('fractions' in sys.modules, m.Fraction(1, 2), 'fractions' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "1/2", "True"]
    with pytest.raises(ModuleNotFoundError):
        lazy_module("no_such_module_evalsi").anything  # noqa: B018


SCORE = """
import sys
from evalsi.cli import main
code = main(sys.argv[1:])
heavy = ("sqlalchemy.dialects.postgresql", "evalsi.runs.calibration._calibrate",
         "evalsi.runs._execute", "evalsi.server", "evalsi.client", "connectrpc", "jsonschema",
         "yaml", "evalsi.sandbox",
         "evalsi.packs.code", "evalsi.packs.ml_classic", "evalsi.packs.judge", "evalsi.packs.text")
print(repr(code), *[m for m in heavy if m in sys.modules], file=sys.stderr)
"""


def test_what_grading_needs_does_not_import_scipy() -> None:
    # The intervals import scipy.special at the first summary, after every record is graded.
    code = (
        "import sys, evalsi._api, evalsi.packs, evalsi.datasets, evalsi.store._sql; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'celpy', 'cel')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_score_run_from_the_cli_imports_none_of_the_heavy_parts(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": str(i), "output": "a", "reference": "a"}) + "\n" for i in range(20)
        )
    )
    args = ["eval", "--data", str(data), "--evaluators", "exact-match", "--store", "s.db"]
    done = subprocess.run(
        [sys.executable, "-c", SCORE, *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.stderr.splitlines()[-1] == "0", done.stderr
    assert "exact-match" in done.stdout


CLI = "import sys; from evalsi.cli import main; sys.exit(main(sys.argv[1:]))"


def _eval_process(tmp_path: Path, mark: str | None) -> tuple[float, str, float]:
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "1", "output": "a", "reference": "a"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "EVALSI_BENCH_MARK"}
    if mark is not None:
        env["EVALSI_BENCH_MARK"] = mark
    args = ["eval", "--data", str(data), "--evaluators", "exact-match", "--store", "s.db", "-q"]
    spawned = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CLI, *args], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    return spawned, done.stderr, time.monotonic()


def test_the_bench_mark_gives_the_first_record_on_the_machine_clock(tmp_path: Path) -> None:
    spawned, stderr, ended = _eval_process(tmp_path, "1")
    marks = [line.split() for line in stderr.splitlines() if line.startswith("evalsi-mark")]
    assert len(marks) == 1, stderr
    assert marks[0][1] == "first-record"
    assert spawned < float(marks[0][2]) < ended  # time.monotonic of the child: one clock


@pytest.mark.parametrize("mark", [None, "0", ""])
def test_without_the_bench_mark_nothing_is_written(tmp_path: Path, mark: str | None) -> None:
    _, stderr, _ = _eval_process(tmp_path, mark)
    assert "evalsi-mark" not in stderr


def test_a_sub_package_read_as_an_attribute_is_imported_then() -> None:
    code = (
        "import sys, evalsi\n"
        "assert 'evalsi.runs' not in sys.modules\n"
        "assert evalsi.runs.grade_run.__name__ == 'grade_run'\n"
        "assert evalsi.store.SqlStore.__name__ == 'SqlStore'\n"
        "for name in ('nothere', '_api2', 'runs.x'):\n"
        "    try:\n"
        "        getattr(evalsi, name)\n"
        "    except AttributeError:\n"
        "        continue\n"
        "    raise SystemExit(name)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_evalsi_loads_no_sub_package_until_a_name_is_used() -> None:
    code = (
        "import sys, evalsi\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('evalsi.'))\n"
        "assert loaded == [], loaded\n"
        "assert evalsi.__version__ == evalsi.core.VERSION\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

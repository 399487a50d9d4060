"""A missing extra gives an install hint and exit 2, never ``internal error: ModuleNotFoundError``
(issue 16). The CLI runs in a subprocess in which the optional packages are made unimportable by
a meta path finder installed before evalsi is imported, as on a plain ``pip install evalsi``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalsi.core import MissingExtraError, missing_extra, require_extra

# Runs first in the child: every import of a blocked top-level package fails as if not installed.
BLOCKER = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = set(sys.argv.pop(1).split(","))

class Blocker(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
from evalsi.cli import main
sys.argv[0] = "evalsi"
sys.exit(main())
"""

SERVER = "starlette,hypercorn,prometheus_client,grpc,opentelemetry,psycopg"


def _evalsi(
    blocked: str, *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, blocked, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    done = _evalsi(SERVER, "serve", "--port", "0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "error: evalsi serve needs the 'server' extra (starlette is not installed)",
        "  hint: pip install 'evalsi[server]'",
    ]
    assert done.stdout == ""


def test_serve_does_not_need_the_postgres_driver_for_sqlite(tmp_path: Path) -> None:
    # Only psycopg is missing: the check passes and the server starts far enough to read its
    # config (a bad port here, so it stops before listening).
    done = _evalsi("psycopg", "serve", "--port", "70000", cwd=tmp_path)
    assert "psycopg" not in done.stderr
    assert "extra" not in done.stderr
    assert done.returncode == 2, done.stderr


def test_a_postgres_store_without_psycopg_says_which_extra(tmp_path: Path) -> None:
    done = _evalsi(
        "psycopg",
        "runs",
        "list",
        "--store",
        "postgresql://nobody@127.0.0.1:1/none",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "needs the 'postgres' extra (psycopg is not installed)" in done.stderr
    assert "  hint: pip install 'evalsi[postgres]'" in done.stderr
    assert "internal error" not in done.stderr


def test_an_optional_import_deep_in_a_command_is_mapped_to_its_extra(tmp_path: Path) -> None:
    # The text pack imports sacrebleu only when a BLEU score is computed: whatever path it takes
    # to report the missing package, the run never ends in an internal error.
    data = tmp_path / "t.jsonl"
    data.write_text('{"id": "1", "output": "a cat", "reference": "a cat"}\n')
    done = _evalsi("sacrebleu", "eval", "--data", str(data), "--evaluators", "bleu", cwd=tmp_path)
    assert "internal error" not in done.stderr
    assert "Traceback" not in done.stderr
    assert "evalsi[text]" in done.stderr + done.stdout


def test_plain_score_needs_no_extra(tmp_path: Path) -> None:
    # Everything optional blocked: grading, the SQLite store and the report all work.
    blocked = SERVER + ",pyarrow,matplotlib,sacrebleu,rouge_score,nltk,pyseccomp"
    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "1", "output": "Paris", "reference": "Paris"}\n')
    done = _evalsi(
        blocked, "eval", "--data", str(data), "--evaluators", "exact-match", "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metrics"][0]["mean"] == 1.0
    report = _evalsi(blocked, "report", "latest", "-o", "r.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r.html").stat().st_size > 0


def test_sandbox_probe_names_the_system_package_when_bwrap_is_missing(tmp_path: Path) -> None:
    # PATH holds no bwrap (an empty directory): the rung says what to apt-get install.
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _evalsi(
        "", "sandbox", "probe", "--format", "json", cwd=tmp_path, env={"PATH": str(empty)}
    )
    assert done.returncode == 0, done.stderr
    rungs = {r["driver"]: r for r in json.loads(done.stdout)["rungs"]}
    assert rungs["bwrap"]["available"] is False
    assert rungs["bwrap"]["reason"] == (
        "bubblewrap is not installed: apt-get install bubblewrap (Debian/Ubuntu)"
    )


def test_require_extra_checks_without_importing() -> None:
    require_extra("x", "core", "json", "os.path")  # present
    with pytest.raises(MissingExtraError) as info:
        require_extra("charts", "reports", "json", "no_such_pkg_evalsi.sub")
    assert info.value.exit_code == 2
    assert str(info.value) == (
        "charts needs the 'reports' extra (no_such_pkg_evalsi is not installed)\n"
        "  hint: pip install 'evalsi[reports]'"
    )
    assert "no_such_pkg_evalsi" not in sys.modules


@pytest.mark.parametrize(
    ("name", "extra"),
    [("psycopg", "postgres"), ("starlette.routing", "server"), ("pyarrow.parquet", "parquet")],
)
def test_missing_extra_maps_a_module_to_its_extra(name: str, extra: str) -> None:
    found = missing_extra(ModuleNotFoundError(f"No module named {name!r}", name=name), "evalsi x")
    assert found is not None
    assert found.extra == extra
    assert found.hint == f"pip install 'evalsi[{extra}]'"


@pytest.mark.parametrize("name", [None, "", "numpy", "evalsi.nothing"])
def test_a_module_of_no_extra_is_not_mapped(name: str | None) -> None:
    # Not an optional package: a real bug, which the CLI reports as an internal error.
    assert missing_extra(ModuleNotFoundError("x", name=name)) is None

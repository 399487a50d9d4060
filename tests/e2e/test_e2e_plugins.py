"""Third-party evaluators through the `evalsi.evaluators` entry-point group, as an installed
distribution publishes them: a fake dist-info on PYTHONPATH, seen by a CLI subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PACKAGE = '''\
from evalsi import evaluator


@evaluator(
    name="acme/shout", version="1.0.0", output="passed", example="evalsi eval --evaluators shout"
)
def shout(record, *, min_length: int = 1):
    """Pass when the output is all upper case."""
    text = record.output.as_text()
    return len(text) >= min_length and text.isupper()


def not_decorated(record):
    return True
'''


def _install(site: Path, entry_points: str) -> dict[str, str]:
    """A fake installed distribution ``mypkg`` 0.1 in ``site``; returns the env to see it."""
    (site / "mypkg").mkdir(parents=True, exist_ok=True)
    (site / "mypkg" / "__init__.py").write_text(PACKAGE)
    info = site / "mypkg-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    old = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(site) + (os.pathsep + old if old else "")}


@pytest.fixture
def shout_data(tmp_path: Path, write_jsonl) -> Path:
    return write_jsonl(
        tmp_path / "shout.jsonl",
        [{"output": "HELLO"}, {"output": "quiet"}, {"output": "LOUD"}, {"output": "Mixed"}],
    )


def test_entry_point_evaluator_is_listed_and_runs(tmp_path, cli, json_out, shout_data):
    env = _install(tmp_path / "site", "[evalsi.evaluators]\nshout = mypkg:shout\n")

    catalog = json_out(cli("catalog", "list", "--format", "json", env=env))
    by_name = {e["name"]: e for e in catalog["evaluators"]}
    assert "shout" in by_name
    assert by_name["shout"]["ref"] == "acme/shout@1.0.0"
    assert by_name["shout"]["namespace"] == "acme"
    assert by_name["shout"]["description"] == "Pass when the output is all upper case."
    assert "exact-match" in by_name  # the built-ins are still there

    shown = json_out(cli("catalog", "show", "acme/shout", "--format", "json", env=env))
    assert shown["params_schema"]["properties"]["min_length"]["type"] == "integer"

    out = json_out(
        cli("eval", "--data", shout_data, "--evaluators", "shout", "--format", "json", env=env)
    )
    (m,) = out["metrics"]
    assert (m["evaluator"], m["n"], m["mean"], m["errors"]) == ("shout", 4, 0.5, 0)
    assert out["evaluators"][0]["ref"] == "acme/shout@1.0.0"

    # Its params go through the same validation as a built-in's.
    out = json_out(
        cli(
            "eval",
            "--data",
            shout_data,
            "--evaluators",
            "acme/shout@1.0.0",
            "--param",
            "shout.min_length=5",
            "--format",
            "json",
            env=env,
        )
    )
    assert out["metrics"][0]["mean"] == 0.25  # only HELLO


def test_without_the_distribution_the_evaluator_is_unknown(cli, user_error, shout_data):
    user_error(cli("eval", "--data", shout_data, "--evaluators", "shout"), "unknown evaluator")


@pytest.mark.parametrize(
    ("target", "needles"),
    [
        ("mypkg:missing_attr", ["shout", "mypkg:missing_attr", "missing_attr"]),
        ("no_such_module:shout", ["shout", "no_such_module"]),
    ],
    ids=["missing-attribute", "missing-module"],
)
def test_broken_entry_point_is_a_clear_error(
    tmp_path, cli, user_error, shout_data, target, needles
):
    env = _install(tmp_path / "site", f"[evalsi.evaluators]\nshout = {target}\n")
    user_error(cli("eval", "--data", shout_data, "--evaluators", "shout", env=env), *needles)
    # Even an unrelated built-in run refuses: a silently missing evaluator would make suites lie.
    user_error(cli("catalog", "list", env=env), "entry point")


def test_entry_point_to_a_non_evaluator_is_a_user_error(tmp_path, cli, user_error, shout_data):
    env = _install(tmp_path / "site", "[evalsi.evaluators]\nshout = mypkg:not_decorated\n")
    user_error(
        cli("eval", "--data", shout_data, "--evaluators", "exact-match", env=env),
        "shout",
        "mypkg:not_decorated",
    )


def test_broken_entry_point_names_the_distribution(tmp_path, cli, user_error, shout_data):
    env = _install(tmp_path / "site", "[evalsi.evaluators]\nshout = no_such_module:shout\n")
    user_error(cli("eval", "--data", shout_data, "--evaluators", "exact-match", env=env), "mypkg")

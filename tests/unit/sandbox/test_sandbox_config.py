"""The ``sandbox`` section of evalsi.yaml: validation naming each field, rungs turned off, the
floor that only ever raises a spec's minimum, and local concurrency."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError
from evalsi.sandbox import (
    Ladder,
    Level,
    NoneDriver,
    Resources,
    Sandbox,
    SandboxConfig,
    SandboxConfigError,
    SandboxSpec,
    SandboxUnavailable,
    build_default_ladder,
    configure,
    current_config,
    default_ladder,
    local_concurrency,
    parse_config,
)
from evalsi.sandbox._config import CONCURRENCY_ENV


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    configure(None)


def test_defaults_allow_every_rung_with_no_floor() -> None:
    config = parse_config(None)
    assert config == SandboxConfig()
    assert config.min_isolation is Level.NONE
    assert all(config.allows(name) for name in ("firecracker", "bwrap", "landlock", "none"))


def test_a_full_section_parses() -> None:
    config = parse_config(
        {"drivers": ["bwrap", "none", "bwrap"], "minIsolation": "Namespaced", "concurrency": 3}
    )
    assert config.drivers == ("bwrap", "none")
    assert config.min_isolation is Level.NAMESPACED
    assert config.concurrency == 3
    assert not config.allows("landlock")


@pytest.mark.parametrize(
    ("section", "where", "needle"),
    [
        ([], "sandbox", "expected a mapping"),
        ({"drivres": ["bwrap"]}, "sandbox.drivres", "unknown key"),
        ({"drivers": "bwrap"}, "sandbox.drivers", "non-empty list"),
        ({"drivers": []}, "sandbox.drivers", "non-empty list"),
        ({"drivers": ["bwrap", "docker"]}, "sandbox.drivers[1]", "unknown rung 'docker'"),
        ({"minIsolation": "strong"}, "sandbox.minIsolation", "unknown isolation level"),
        ({"minIsolation": 2}, "sandbox.minIsolation", "expected a level name"),
        ({"concurrency": 0}, "sandbox.concurrency", "integer >= 1"),
        ({"concurrency": True}, "sandbox.concurrency", "integer >= 1"),
        ({"concurrency": "4"}, "sandbox.concurrency", "integer >= 1"),
        ({"cgroups": "yes"}, "sandbox.cgroups", "true or false"),
    ],
)
def test_bad_sections_name_the_field(section: Any, where: str, needle: str) -> None:
    with pytest.raises(SandboxConfigError) as info:
        parse_config(section)
    assert [w for w, _ in info.value.problems] == [where]
    assert needle in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SandboxConfigError) as info:
        parse_config({"drivers": ["x"], "minIsolation": "y", "concurrency": -1, "z": 1})
    assert len(info.value.problems) == 4


def test_turned_off_rungs_are_reported_and_never_chosen() -> None:
    ladder = build_default_ladder(parse_config({"drivers": ["none"]}))
    reports = {r.driver: r for r in ladder.probe_all()}
    for name in ("firecracker", "bwrap", "landlock"):
        assert not reports[name].available
        assert reports[name].reason == "turned off (sandbox.drivers)"
    assert reports["none"].available
    with pytest.raises(SandboxUnavailable, match="turned off"):
        ladder.choose(Level.CONFINED)


def test_configure_rebuilds_the_default_ladder() -> None:
    before = default_ladder()
    assert default_ladder() is before  # probed once, reused
    configure(parse_config({"drivers": ["none"]}))
    after = default_ladder()
    assert after is not before
    assert [r.driver for r in after.probe_all() if r.available] == ["none"]
    configure(None)
    assert current_config() == SandboxConfig()


def test_the_floor_raises_a_specs_minimum_and_never_lowers_it(tmp_path: Path) -> None:
    ladder = Ladder([NoneDriver()])
    spec = SandboxSpec(min_isolation=Level.NONE, timeout_seconds=10)
    with Sandbox.create(spec, ladder=ladder) as sb:  # no floor: none is accepted
        assert sb.exec(["true"]).exit_code == 0
    configure(parse_config({"minIsolation": "confined"}))
    with pytest.raises(SandboxUnavailable, match="at or above confined"):
        Sandbox.create(spec, ladder=ladder)
    configure(parse_config({"minIsolation": "none"}))  # a low floor cannot lower a spec
    with pytest.raises(SandboxUnavailable, match="at or above namespaced"):
        Sandbox.create(SandboxSpec(min_isolation=Level.NAMESPACED), ladder=ladder)


def test_local_concurrency_env_then_config_then_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv(CONCURRENCY_ENV, raising=False)
    assert local_concurrency() == (os.cpu_count() or 1)
    configure(parse_config({"concurrency": 5}))
    assert local_concurrency() == 5
    monkeypatch.setenv(CONCURRENCY_ENV, "7")
    assert local_concurrency() == 7
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(CONCURRENCY_ENV, bad)
        with pytest.raises(ValueError, match=CONCURRENCY_ENV):
            local_concurrency()


def test_server_config_defaults_to_a_confined_floor(tmp_path: Path) -> None:
    from evalsi.server._config import load_config, load_sandbox_config

    assert load_config(None).sandbox.min_isolation is Level.CONFINED
    path = tmp_path / "evalsi.yaml"
    path.write_text("sandbox:\n  drivers: [bwrap]\n  concurrency: 2\n")
    server = load_config(path).sandbox
    assert (server.drivers, server.min_isolation, server.concurrency) == (
        ("bwrap",),
        Level.CONFINED,
        2,
    )
    path.write_text("sandbox:\n  minIsolation: none\n")
    assert load_config(path).sandbox.min_isolation is Level.NONE  # only when said outright
    assert load_sandbox_config(path).min_isolation is Level.NONE
    path.write_text("sandbox:\n  drivers: [bwrap]\n")
    assert load_sandbox_config(path).min_isolation is Level.NONE  # embedded: no server floor


def test_server_config_names_bad_sandbox_fields(tmp_path: Path) -> None:
    from evalsi.server._config import load_config, load_sandbox_config

    path = tmp_path / "evalsi.yaml"
    path.write_text("sandbox:\n  drivers: [bwrap, qemu]\n  minIsolation: max\n")
    for load in (load_config, load_sandbox_config):
        with pytest.raises(SpecError) as info:
            load(path)
        text = str(info.value)
        assert "sandbox.drivers[1]: unknown rung 'qemu'" in text
        assert "sandbox.minIsolation" in text


def test_firecracker_settings_are_validated_by_the_driver() -> None:
    with pytest.raises(SandboxConfigError) as info:
        parse_config(
            {"firecracker": {"binary": "/x/fc", "kernel": "/x/k", "rootfs": "/x/r", "vcpus": 0}}
        )
    ((where, why),) = info.value.problems
    assert where == "sandbox.firecracker.vcpus"
    assert "1 to 32" in why
    config = parse_config(
        {"firecracker": {"binary": "/nope/fc", "kernel": "/nope/k", "rootfs": "/nope/r"}}
    )
    report = build_default_ladder(config).probe_all()[0]
    assert (report.driver, report.available) == ("firecracker", False)
    assert "/nope/fc" in report.reason


def test_cgroups_can_be_turned_off_and_the_report_says_so() -> None:
    from evalsi.sandbox import _cgroup
    from evalsi.sandbox._bwrap import BwrapDriver

    configure(parse_config({"cgroups": False}))
    assert current_config().cgroups is False
    assert not _cgroup.available()
    assert BwrapDriver().isolation.missing[0] == "cgroup"
    with _cgroup.limits(2_000_000_000, Resources()) as group:
        assert group is None

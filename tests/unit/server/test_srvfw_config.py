"""``evalsi.yaml`` validation: defaults, every field, errors naming the field path, CLI flags
overriding the file, and the refusal of non-loopback addresses without --no-auth."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import SpecError, UserError
from evalsi.server._config import is_loopback, load_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_live_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None)
    assert (cfg.host, cfg.port) == ("127.0.0.1", 8080)
    assert cfg.data_dir == tmp_path.resolve() / ".evalsi"
    assert cfg.datasets_dir == cfg.data_dir / "datasets"
    assert cfg.store == str(cfg.data_dir / "evalsi.db")
    assert cfg.judges == {}
    assert not cfg.allow_python_targets


def test_every_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
server: {host: localhost, port: 9001, maxBodyBytes: 2048, maxConcurrentRuns: 2}
storage: {postgres: {dsn: "postgresql://u:pw@127.0.0.1/db"}}
dataDir: data
datasetsDir: /srv/ds
allowPythonTargets: true
judges:
  default:
    connector: openai-compatible
    baseUrl: http://127.0.0.1:8000/v1
    model: m
    secretRef: file:key.txt
""",
    )
    cfg = load_config(path)
    assert (cfg.host, cfg.port, cfg.max_body_bytes, cfg.max_concurrent_runs) == (
        "localhost",
        9001,
        2048,
        2,
    )
    assert cfg.store == "postgresql://u:pw@127.0.0.1/db"
    assert cfg.data_dir == tmp_path.resolve() / "data"
    assert cfg.datasets_dir == Path("/srv/ds")
    assert cfg.allow_python_targets
    judge = cfg.judges["default"]
    assert (judge.model, judge.base_url) == ("m", "http://127.0.0.1:8000/v1")
    assert judge.secret_ref == f"file:{tmp_path.resolve() / 'key.txt'}"


def test_sqlite_path_and_flags_override_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {port: 9001}\nstorage: {sqlite: {path: x/e.db}}\n")
    cfg = load_config(path, host="::1", port=9002)
    assert (cfg.host, cfg.port) == ("::1", 9002)
    assert cfg.store == str(tmp_path.resolve() / "x" / "e.db")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('server: {port: "x"}', 'evalsi.yaml: server.port: expected an integer 1-65535, got "x"'),
        ("server: {port: 70000}", "server.port: expected an integer 1-65535, got 70000"),
        ("server: {prot: 1}", "server.prot: unknown field 'prot'"),
        ("colour: blue", "evalsi.yaml: colour: unknown field 'colour'"),
        ("server: [1]", "server: expected a mapping, got a list"),
        ("storage: {mysql: {}}", "storage.mysql: unknown field 'mysql'"),
        ("storage: {postgres: {}}", "storage.postgres: missing required field 'dsn'"),
        ("storage: {postgres: {dsn: 'mysql://x'}}", "storage.postgres.dsn: expected a postgresql"),
        ("allowPythonTargets: 'yes'", 'allowPythonTargets: expected true or false, got "yes"'),
        ("dataDir: 3", "dataDir: expected a non-empty string, got 3"),
        ("judges: {j: {connector: oai, model: m}}", "judges.j.connector: expected one of"),
        ("judges: {j: {model: m, extra: 1}}", "judges.j.extra: unknown field 'extra'"),
        ("judges: [1]", "judges: expected a mapping of name to judge"),
        ("server: {port: 1", "evalsi.yaml:2: not valid YAML"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text + "\n")
    with pytest.raises(SpecError) as err:
        load_config(path)
    message = str(err.value).replace(str(path), "evalsi.yaml")
    assert expected in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {port: x, maxBodyBytes: -1}\nfoo: 1\n")
    with pytest.raises(SpecError) as err:
        load_config(path)
    assert len(str(err.value).splitlines()) == 3


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_non_loopback_needs_no_auth() -> None:
    with pytest.raises(UserError) as err:
        load_config(None, host="0.0.0.0")
    assert "refusing to listen on 0.0.0.0" in str(err.value)
    assert "--no-auth" in str(err.value)
    assert load_config(None, host="0.0.0.0", no_auth=True).no_auth


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.5.6.7", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback

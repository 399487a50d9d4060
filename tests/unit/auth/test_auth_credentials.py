"""The credential cache: the OS keyring when one exists, else a 0600 file nobody else can read."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors
import pytest
from keyring.backends import fail

from evalsi.auth import _credentials as credentials
from evalsi.auth._credentials import Tokens
from evalsi.core import UserError

SERVER = "https://evalsi.example.com"
TOKENS = Tokens(
    access_token="at-secret",
    refresh_token="rt-secret",
    id_token=None,
    expires_at=1_900_000_000.5,
    issuer="https://idp.example.com",
    client_id="evalsi-cli",
)


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A real keyring backend that keeps passwords in a dict."""

    priority = 1

    def __init__(self, *, refuse: bool = False) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.values: dict[tuple[str, str], str] = {}
        self.refuse = refuse

    def get_password(self, service: str, username: str) -> str | None:
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.refuse:
            raise keyring.errors.PasswordSetError("the value is too long")
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.values.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError("not found")


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh ``XDG_CONFIG_HOME`` and no keyring backend (as on a headless machine)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # type: ignore[no-untyped-call]
    yield tmp_path / "config"
    keyring.set_keyring(before)


def test_the_file_is_private_and_round_trips(config_home: Path) -> None:
    credentials.save(SERVER, TOKENS)
    path = config_home / "evalsi" / "credentials"
    assert credentials.credentials_path() == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert credentials.load(SERVER) == TOKENS
    assert credentials.load("https://other.example.com") is None
    assert [p.name for p in path.parent.iterdir()] == ["credentials"]  # no temporary file left


def test_a_umask_cannot_widen_the_file() -> None:
    old = os.umask(0)
    try:
        credentials.save(SERVER, TOKENS)
    finally:
        os.umask(old)
    assert stat.S_IMODE(credentials.credentials_path().stat().st_mode) == 0o600


def test_servers_are_keyed_by_their_normalised_url() -> None:
    credentials.save("HTTPS://Evalsi.Example.com:443/", TOKENS)
    assert credentials.load(SERVER) == TOKENS
    assert credentials.normalize_server_url("http://h:80/api/") == "http://h/api"
    assert credentials.normalize_server_url("http://[::1]:8080") == "http://[::1]:8080"
    with pytest.raises(UserError, match="not an http"):
        credentials.save("ftp://evalsi.example.com", TOKENS)


def test_saving_one_server_keeps_the_others_and_delete_forgets_one() -> None:
    other = "http://127.0.0.1:8080"
    credentials.save(SERVER, TOKENS)
    credentials.save(other, TOKENS)
    assert credentials.delete(SERVER) is True
    assert credentials.load(SERVER) is None
    assert credentials.load(other) == TOKENS
    assert credentials.delete(SERVER) is False


def test_a_file_others_can_read_is_refused() -> None:
    credentials.save(SERVER, TOKENS)
    path = credentials.credentials_path()
    path.chmod(0o644)
    with pytest.raises(UserError, match=r"can be read by other users \(mode 644\)") as e:
        credentials.load(SERVER)
    assert e.value.hint == f"chmod 600 {path}"
    with pytest.raises(UserError, match="chmod 600"):
        credentials.save(SERVER, TOKENS)  # not rewritten over either


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_a_file_someone_else_owns_is_refused() -> None:
    credentials.save(SERVER, TOKENS)
    os.chown(credentials.credentials_path(), 65534, 65534)
    with pytest.raises(UserError, match="is not owned by you"):
        credentials.load(SERVER)


def test_a_symlink_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "planted"
    target.write_text(json.dumps({"version": 1, "servers": {}}))
    target.chmod(0o600)
    path = credentials.credentials_path()
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(UserError, match="is a symbolic link: remove it"):
        credentials.load(SERVER)


@pytest.mark.parametrize(
    "text",
    ["not json", '{"servers": []}', '{"version": 9, "servers": {}}'],
)
def test_a_file_that_is_not_ours_is_a_clear_error(text: str) -> None:
    path = credentials.credentials_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(UserError, match="credentials file"):
        credentials.load(SERVER)


def test_a_malformed_entry_is_a_clear_error() -> None:
    path = credentials.credentials_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "servers": {SERVER: {"access_token": 1}}}))
    path.chmod(0o600)
    with pytest.raises(UserError, match="malformed: log in again"):
        credentials.load(SERVER)


def test_a_real_keyring_keeps_the_tokens_instead_of_the_file() -> None:
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    credentials.save(SERVER, TOKENS)
    marker = {"version": 1, "servers": {SERVER: {"in": "keyring"}}}  # where, never what
    assert json.loads(credentials.credentials_path().read_text()) == marker
    assert set(backend.values) == {("evalsi", SERVER)}
    assert credentials.load(SERVER + "/") == TOKENS
    assert credentials.delete(SERVER) is True
    assert backend.values == {}
    assert credentials.load(SERVER) is None
    assert credentials.delete(SERVER) is False


def test_a_keyring_that_refuses_the_value_falls_back_to_the_file() -> None:
    keyring.set_keyring(MemoryKeyring(refuse=True))
    credentials.save(SERVER, TOKENS)
    assert credentials.credentials_path().exists()
    assert credentials.load(SERVER) == TOKENS
    assert credentials.delete(SERVER) is True
    assert credentials.load(SERVER) is None


def test_a_keyring_save_removes_an_older_copy_in_the_file() -> None:
    credentials.save(SERVER, TOKENS)  # no backend yet: the file
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    credentials.save(SERVER, TOKENS)
    document = json.loads(credentials.credentials_path().read_text())
    assert document == {"version": 1, "servers": {SERVER: {"in": "keyring"}}}


def test_tokens_never_show_their_values() -> None:
    text = repr(TOKENS) + str(TOKENS)
    assert "secret" not in text
    assert "https://idp.example.com" in text


def test_a_keyring_that_lost_the_tokens_says_to_log_in_again() -> None:
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    credentials.save(SERVER, TOKENS)
    backend.values.clear()  # the user wiped the keyring
    with pytest.raises(UserError, match="no longer has it") as e:
        credentials.load(SERVER)
    assert e.value.hint is not None
    assert "evalsi login" in e.value.hint


def test_no_sign_in_is_found_without_asking_the_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise AssertionError("the keyring was asked")

    monkeypatch.setattr(credentials, "_keyring", boom)
    assert credentials.load(SERVER) is None
    from evalsi.auth import login_token

    assert login_token(SERVER) is None

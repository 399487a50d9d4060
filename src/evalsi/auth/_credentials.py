"""Where ``evalsi login`` keeps the tokens it got, one entry per server.

The OS keyring (macOS Keychain, Windows Credential Manager, the Secret Service) when the
``keyring`` package finds a real backend; otherwise a JSON file at
``$XDG_CONFIG_HOME/evalsi/credentials`` (``~/.config/evalsi/credentials``), like the files
``gh`` and ``gcloud`` keep. The file is created with mode 0600 in a 0700 directory and replaced
atomically; a file other users can read, or that is not the user's, is refused rather than
trusted (another user could have planted tokens, or read them).

A keyring that refuses a value (Windows limits its length) falls back to the file. Tokens in
the keyring leave a marker in the file (no secret, only where they are), so a command without
a sign-in reads one small file and never waits for the keyring to find its backends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import secrets
import stat
import time
import urllib.parse
from pathlib import Path
from typing import Any

from evalsi.core import UserError

SERVICE = "evalsi"
FILE_VERSION = 1
_TOKEN_FIELDS = ("access_token", "refresh_token", "id_token", "expires_at", "issuer", "client_id")
_IN_KEYRING = {"in": "keyring"}  # the file's entry for tokens the keyring holds
_NO_BACKEND = ("keyring.backends.fail", "keyring.backends.null")


@dataclasses.dataclass(frozen=True, slots=True)
class Tokens:
    """What a sign-in yields. ``expires_at`` is the access token's expiry (epoch seconds)."""

    access_token: str = dataclasses.field(repr=False)
    refresh_token: str | None = dataclasses.field(repr=False)
    id_token: str | None = dataclasses.field(repr=False)
    expires_at: float | None
    issuer: str
    client_id: str

    def expires_within(self, seconds: float) -> bool:
        """Whether the access token is expired, or will be within ``seconds``."""
        return self.expires_at is not None and self.expires_at - seconds <= time.time()


def normalize_server_url(server_url: str) -> str:
    """The key of a server: scheme and host lower-cased, no default port, no trailing slash,
    no query or fragment (``HTTPS://Evalsi.Example:443/`` is ``https://evalsi.example``)."""
    parts = urllib.parse.urlsplit(server_url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UserError(f"{server_url!r} is not an http(s) server URL")
    scheme = parts.scheme.lower()
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    port = parts.port
    netloc = (
        host
        if port is None or (scheme, port) in (("http", 80), ("https", 443))
        else (f"{host}:{port}")
    )
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def credentials_path() -> Path:
    """``$XDG_CONFIG_HOME/evalsi/credentials``, or ``~/.config/evalsi/credentials``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "evalsi" / "credentials"


def save(server_url: str, tokens: Tokens) -> None:
    """Keeps ``tokens`` for ``server_url``, replacing what was kept for it."""
    key = normalize_server_url(server_url)
    value = json.dumps({name: getattr(tokens, name) for name in _TOKEN_FIELDS})
    keyring = _keyring()
    if keyring is not None:
        try:
            keyring.set_password(SERVICE, key, value)
        except keyring.errors.KeyringError:
            pass  # refused (e.g. too long for the Windows vault): the file keeps it instead
        else:  # the marker replaces an older copy in the file, which must not outlive this one
            _update_file(key, dict(_IN_KEYRING))
            return
    _update_file(key, json.loads(value))


def load(server_url: str) -> Tokens | None:
    """The tokens kept for ``server_url``, or ``None``."""
    key = normalize_server_url(server_url)
    entry = _read_file().get(key)
    if entry != _IN_KEYRING:
        return None if entry is None else _tokens(entry, str(credentials_path()))
    keyring = _keyring()
    text = None
    if keyring is not None:
        try:
            text = keyring.get_password(SERVICE, key)
        except keyring.errors.KeyringError as e:
            raise UserError(f"the OS keyring cannot be read: {type(e).__name__}") from e
    if text is None:
        raise UserError(
            f"the sign-in to {key} was kept in an OS keyring that no longer has it",
            hint=f"evalsi login --server {server_url}",
        )
    try:
        return _tokens(json.loads(text), "the OS keyring")
    except json.JSONDecodeError:
        raise UserError("the OS keyring's evalsi entry is not JSON: log in again") from None


def delete(server_url: str) -> bool:
    """Forgets the tokens kept for ``server_url``; whether there were any."""
    key = normalize_server_url(server_url)
    found = False
    keyring = _keyring()
    if keyring is not None:
        with contextlib.suppress(keyring.errors.PasswordDeleteError):
            keyring.delete_password(SERVICE, key)
            found = True
    return _update_file(key, None) or found


def _keyring() -> Any:
    """The ``keyring`` module when it has a real backend, else ``None`` (imported lazily: it is
    an optional dependency, and finding its backends takes time)."""
    try:
        import keyring
        import keyring.errors
    except ImportError:
        return None
    if type(keyring.get_keyring()).__module__ in _NO_BACKEND:
        return None
    return keyring


def _tokens(entry: Any, where: str) -> Tokens:
    ok = isinstance(entry, dict) and all(
        isinstance(entry.get(name), str) for name in ("access_token", "issuer", "client_id")
    )
    ok = ok and all(isinstance(entry.get(n), str | None) for n in ("refresh_token", "id_token"))
    ok = ok and isinstance(entry.get("expires_at"), int | float | None)
    if not ok:
        raise UserError(f"a credential entry in {where} is malformed: log in again")
    return Tokens(**{name: entry.get(name) for name in _TOKEN_FIELDS})


def _read_file() -> dict[str, Any]:
    path = credentials_path()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UserError(f"the credentials file {path} is a symbolic link: remove it") from e
        raise UserError(f"cannot open the credentials file {path}: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        _check_private(path, os.fstat(f.fileno()))
        text = f.read()
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("servers"), dict):
        raise UserError(f"the credentials file {path} is not evalsi's: delete it and log in again")
    if document.get("version") != FILE_VERSION:
        raise UserError(f"the credentials file {path} has an unknown version: log in again")
    servers: dict[str, Any] = document["servers"]
    return servers


def _check_private(path: Path, st: os.stat_result) -> None:
    if not hasattr(os, "getuid"):  # Windows: the profile directory's ACL protects it
        return
    if st.st_uid != os.getuid():
        raise UserError(f"the credentials file {path} is not owned by you: remove it")
    if st.st_mode & 0o077:
        mode = stat.S_IMODE(st.st_mode)
        raise UserError(
            f"the credentials file {path} can be read by other users (mode {mode:o})",
            hint=f"chmod 600 {path}",
        )


def _update_file(key: str, entry: dict[str, Any] | None) -> bool:
    """Sets (or with ``None`` removes) one server's entry; whether the entry existed before."""
    path = credentials_path()
    servers = _read_file()
    existed = key in servers
    if entry is None and not existed:
        return False
    if entry is None:
        del servers[key]
    else:
        servers[key] = entry
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.parent.stat().st_uid == getattr(os, "getuid", lambda: -1)():
        os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".credentials.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": FILE_VERSION, "servers": servers}, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return existed

"""Signing a bundle's manifest with the real ssh-keygen, and every way a check must fail."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.evidence._signing import (
    MANIFEST_FILE,
    NAMESPACE,
    SIGNATURE_FILE,
    sign_manifest,
    verify_signature,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")

SRC = Path(__file__).resolve().parents[3] / "src"


def _key(where: Path, name: str, *, passphrase: str = "") -> Path:
    key = where / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f", str(key)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return key


def _allowed(where: Path, *lines: tuple[str, Path, str]) -> Path:
    """An allowed-signers file: (principal, key, options) per line."""
    path = where / "allowed_signers"
    text = "".join(
        f"{who} {opts + ' ' if opts else ''}{Path(str(key) + '.pub').read_text().strip()}\n"
        for who, key, opts in lines
    )
    path.write_text(text)
    return path


def _fingerprint(key: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", f"{key}.pub"], check=True, capture_output=True, text=True
    )
    return out.stdout.split()[1]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "bundle"
    path.mkdir()
    (path / MANIFEST_FILE).write_text('{"files": {"trace.jsonl": "sha256:00ff"}}\n')
    return path


@pytest.fixture
def alice(tmp_path: Path) -> Path:
    return _key(tmp_path, "alice")


def test_sign_then_verify_names_the_signer_and_the_key(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    written = sign_manifest(bundle, alice)
    assert written == bundle / SIGNATURE_FILE
    assert written.read_bytes().startswith(b"-----BEGIN SSH SIGNATURE-----")
    assert sorted(p.name for p in bundle.iterdir()) == [MANIFEST_FILE, SIGNATURE_FILE]
    check = verify_signature(bundle, _allowed(tmp_path, ("alice@example.org", alice, "")))
    assert check.verified, check.reason
    assert check.identity == "alice@example.org"
    assert check.fingerprint == _fingerprint(alice)
    assert check.fingerprint.startswith("SHA256:")


def test_the_signature_is_an_ordinary_sshsig_in_the_evalsi_namespace(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    """A reviewer with only OpenSSH checks it the same way."""
    sign_manifest(bundle, alice)
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""))
    argv = ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "alice@example.org"]
    with (bundle / MANIFEST_FILE).open("rb") as manifest:
        ok = subprocess.run(
            [*argv, "-n", NAMESPACE, "-s", str(bundle / SIGNATURE_FILE)],
            stdin=manifest,
            capture_output=True,
        )
        manifest.seek(0)
        other = subprocess.run(
            [*argv, "-n", "git", "-s", str(bundle / SIGNATURE_FILE)],
            stdin=manifest,
            capture_output=True,
        )
    assert ok.returncode == 0, ok.stderr
    assert other.returncode != 0


def test_one_changed_byte_in_the_manifest_fails(bundle: Path, alice: Path, tmp_path: Path) -> None:
    sign_manifest(bundle, alice)
    manifest = bundle / MANIFEST_FILE
    data = bytearray(manifest.read_bytes())
    data[12] ^= 0x01
    manifest.write_bytes(bytes(data))
    check = verify_signature(bundle, _allowed(tmp_path, ("alice@example.org", alice, "")))
    assert not check.verified
    assert check.identity is None
    assert check.fingerprint is None
    assert "does not verify" in check.reason
    assert "\n" not in check.reason


def test_a_key_missing_from_allowed_signers_fails(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    mallory = _key(tmp_path, "mallory")
    sign_manifest(bundle, mallory)
    check = verify_signature(bundle, _allowed(tmp_path, ("alice@example.org", alice, "")))
    assert not check.verified
    assert "no allowed signer" in check.reason


def test_an_allowed_signer_for_another_namespace_fails(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    sign_manifest(bundle, alice)
    allowed = _allowed(tmp_path, ("alice@example.org", alice, 'namespaces="other"'))
    check = verify_signature(bundle, allowed)
    assert not check.verified
    assert "not permitted" in check.reason
    scoped = _allowed(tmp_path, ("alice@example.org", alice, f'namespaces="{NAMESPACE}"'))
    assert verify_signature(bundle, scoped).verified


def test_garbage_and_oversized_signatures_are_findings(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""))
    sig = bundle / SIGNATURE_FILE
    sig.write_bytes(b"\x00\xffnot a signature\n" * 10)
    check = verify_signature(bundle, allowed)
    assert not check.verified
    assert check.reason.isprintable()
    assert len(check.reason) <= 300
    sig.write_bytes(b"-----BEGIN SSH SIGNATURE-----\n" + b"A" * 70_000)
    check = verify_signature(bundle, allowed)
    assert not check.verified
    assert "larger than 64 KiB" in check.reason


def test_a_missing_signature_is_a_finding(bundle: Path, alice: Path, tmp_path: Path) -> None:
    check = verify_signature(bundle, _allowed(tmp_path, ("alice@example.org", alice, "")))
    assert not check.verified
    assert check.reason == "no signature (manifest.json.sig)"


def test_an_unreadable_allowed_signers_file_is_a_user_error(bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"allowed-signers file .*nowhere"):
        verify_signature(bundle, tmp_path / "nowhere")


def test_resigning_needs_force_and_then_replaces(bundle: Path, alice: Path, tmp_path: Path) -> None:
    bob = _key(tmp_path, "bob")
    sign_manifest(bundle, alice)
    first = (bundle / SIGNATURE_FILE).read_bytes()
    with pytest.raises(UserError, match="already signed; --force to replace"):
        sign_manifest(bundle, bob)
    assert (bundle / SIGNATURE_FILE).read_bytes() == first
    sign_manifest(bundle, bob, force=True)
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""), ("bob@example.org", bob, ""))
    check = verify_signature(bundle, allowed)
    assert check.verified
    assert check.identity == "bob@example.org"
    assert check.fingerprint == _fingerprint(bob)


def test_a_passphrase_key_fails_at_once_and_leaves_the_old_signature(
    bundle: Path, alice: Path, tmp_path: Path
) -> None:
    locked = _key(tmp_path, "locked", passphrase="correct horse")
    sign_manifest(bundle, alice)
    before = (bundle / SIGNATURE_FILE).read_bytes()
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        sign_manifest(bundle, locked, force=True)
    assert time.monotonic() - started < 5
    assert "passphrase" in caught.value.message
    assert caught.value.hint is not None
    assert f"ssh-add {locked}" in caught.value.hint
    assert f"{locked}.pub" in caught.value.hint
    assert (bundle / SIGNATURE_FILE).read_bytes() == before
    assert sorted(p.name for p in bundle.iterdir()) == [MANIFEST_FILE, SIGNATURE_FILE]


def test_a_passphrase_key_never_prompts_on_a_terminal(bundle: Path, tmp_path: Path) -> None:
    """The caller owns a terminal that ssh-keygen could prompt on; it still fails at once.

    Control: without ``start_new_session`` ssh-keygen opens /dev/tty, prints "Enter
    passphrase" there and waits, and this test fails on its deadline.
    """
    locked = _key(tmp_path, "locked", passphrase="correct horse")
    code = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        os.close(os.open(os.ttyname(0), os.O_RDWR))  # a session leader takes its terminal
        os.close(os.open("/dev/tty", os.O_RDWR))
        print("TTY-OK", flush=True)
        from evalsi.core import UserError
        from evalsi.evidence._signing import sign_manifest
        try:
            sign_manifest(Path({str(bundle)!r}), Path({str(locked)!r}))
        except UserError as e:
            print("REFUSED:", e.message, flush=True)
        """
    )
    main, sub = os.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=sub,
        stdout=sub,
        stderr=sub,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    os.close(sub)
    seen = b""
    deadline = time.monotonic() + 8
    try:
        while time.monotonic() < deadline:
            if select.select([main], [], [], 0.1)[0]:
                try:
                    seen += os.read(main, 4096)
                except OSError:  # EIO: nothing holds the terminal's other side any more
                    break
            elif child.poll() is not None:
                break
        # The terminal closes (EIO) as the child exits, a moment before it can be reaped.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.5, deadline - time.monotonic()))
        finished = child.poll() is not None
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        os.close(main)
    text = seen.decode("utf-8", "replace")
    assert finished, f"still waiting after 8 s; the terminal shows {text!r}"
    assert "TTY-OK" in text
    assert "REFUSED:" in text
    assert "passphrase" in text
    assert "Enter passphrase" not in text
    assert not (bundle / SIGNATURE_FILE).exists()


def test_a_missing_or_unusable_key_is_a_user_error(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError, match=r"signing key not found: .*nokey"):
        sign_manifest(bundle, tmp_path / "nokey")
    lonely = _key(tmp_path, "lonely")
    lonely.unlink()  # only lonely.pub left, and no agent holds it
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(UserError, match="could not sign"):
        sign_manifest(bundle, Path(f"{lonely}.pub"))
    assert not (bundle / SIGNATURE_FILE).exists()


@pytest.mark.parametrize("which", [MANIFEST_FILE, SIGNATURE_FILE])
def test_symlinked_manifest_or_signature_is_refused(
    bundle: Path, alice: Path, tmp_path: Path, which: str
) -> None:
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""))
    sign_manifest(bundle, alice)
    elsewhere = tmp_path / f"real-{which}"
    (bundle / which).rename(elsewhere)
    (bundle / which).symlink_to(elsewhere)
    check = verify_signature(bundle, allowed)
    assert not check.verified
    assert f"{which} is a symlink" in check.reason
    with pytest.raises(UserError, match=f"{which} is a symlink"):
        sign_manifest(bundle, alice, force=True)
    assert (bundle / which).is_symlink()


def test_a_symlinked_bundle_is_refused(bundle: Path, alice: Path, tmp_path: Path) -> None:
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""))
    sign_manifest(bundle, alice)
    link = tmp_path / "link"
    link.symlink_to(bundle)
    with pytest.raises(UserError, match="is a symlink"):
        sign_manifest(link, alice, force=True)
    check = verify_signature(link, allowed)
    assert not check.verified
    assert "is a symlink" in check.reason
    assert verify_signature(bundle, allowed).verified


def test_without_ssh_keygen_signing_errs_and_checking_fails(
    bundle: Path, alice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = _allowed(tmp_path, ("alice@example.org", alice, ""))
    sign_manifest(bundle, alice)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(UserError, match="ssh-keygen not found"):
        sign_manifest(bundle, alice, force=True)
    check = verify_signature(bundle, allowed)
    assert not check.verified
    assert check.reason == "ssh-keygen not found"


def test_an_ssh_keygen_without_y_is_named_too_old(
    bundle: Path, alice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What OpenSSH 7.x (glibc getopt) prints for -Y; only its text is faked."""
    old = tmp_path / "old-bin"
    old.mkdir()
    fake = old / "ssh-keygen"
    fake.write_text(
        "#!/bin/sh\n"
        "echo \"ssh-keygen: invalid option -- 'Y'\" >&2\n"
        "echo 'usage: ssh-keygen [-q] [-b bits] [-t dsa | ecdsa | ed25519 | rsa]' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(old))
    with pytest.raises(UserError, match="cannot sign files") as caught:
        sign_manifest(bundle, alice)
    assert caught.value.hint is not None
    assert "OpenSSH 8.2" in caught.value.hint


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private ssh-agent on a short socket path (sun_path holds 108 bytes)."""
    binary = shutil.which("ssh-agent")
    if binary is None or shutil.which("ssh-add") is None:
        pytest.skip("needs ssh-agent and ssh-add")
    with tempfile.TemporaryDirectory(prefix="ag") as where:
        sock = os.path.join(where, "s")
        process = subprocess.Popen(
            [binary, "-D", "-a", sock], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 5
            while not os.path.exists(sock):
                assert time.monotonic() < deadline, "ssh-agent did not start"
                time.sleep(0.01)
            monkeypatch.setenv("SSH_AUTH_SOCK", sock)
            yield sock
        finally:
            process.terminate()
            process.wait(timeout=5)


def test_a_passphrase_key_signs_through_ssh_agent(bundle: Path, tmp_path: Path, agent: str) -> None:
    """The documented way: ssh-add the key once, then sign with KEY.pub."""
    locked = _key(tmp_path, "locked", passphrase="correct horse")
    askpass = tmp_path / "askpass"
    askpass.write_text("#!/bin/sh\necho 'correct horse'\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"}
    subprocess.run(
        ["ssh-add", "-q", str(locked)],
        env=env,
        stdin=subprocess.DEVNULL,
        check=True,
        timeout=10,
        start_new_session=True,
    )
    sign_manifest(bundle, Path(f"{locked}.pub"))
    check = verify_signature(bundle, _allowed(tmp_path, ("carol@example.org", locked, "")))
    assert check.verified, check.reason
    assert check.fingerprint == _fingerprint(locked)

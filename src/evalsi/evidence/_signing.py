"""Sign and verify a bundle's ``manifest.json`` with OpenSSH (``ssh-keygen -Y``).

The signature is a detached SSHSIG file, ``manifest.json.sig``, beside the manifest, made in the
namespace ``evalsi-bundle`` (a signature made for git commits or anything else never verifies
here). OpenSSH does the cryptography and the key handling, so any key ``ssh-keygen`` or
``ssh-agent`` holds can sign, and a reviewer needs nothing but OpenSSH to check.

What a verified signature proves: ``manifest.json`` is, byte for byte, what the holder of a key
listed in YOUR allowed-signers file signed, in this namespace. Together with the checksums the
manifest lists, every file it names is unchanged since that signature was made.

What it does not prove: who ran the agent; that the run happened as the bundle records it; that
the code, model or data were the ones named; that the key was not stolen or shared; anything
about the quality of the work. It is only as trustworthy as the allowed-signers file: whoever can
add a line there can make any key "verified".

Signing never prompts. ``ssh-keygen`` runs in a new session (no controlling terminal), with stdin
from ``/dev/null`` and ``SSH_ASKPASS_REQUIRE=never``, so a key with a passphrase fails at once
instead of waiting for a keyboard nobody watches; load such a key with ``ssh-add`` and pass its
public half (``KEY.pub``): ``ssh-keygen`` then signs through ``ssh-agent``.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evalsi.core import UserError

NAMESPACE = "evalsi-bundle"
MANIFEST_FILE = "manifest.json"
SIGNATURE_FILE = "manifest.json.sig"
SIGNATURE_CAP = 64 * 1024  # an SSHSIG is well under 2 KiB even for RSA-4096
TIMEOUT_SECONDS = 30.0  # generous for an agent on a hardware token; nothing waits for a person
REASON_CHARS = 300

_ARMOR = b"-----BEGIN SSH SIGNATURE-----"
_GOOD = re.compile(r'^Good "[^"]*" signature for .* with (\S+) key (SHA256:\S+)', re.MULTILINE)
_TOO_OLD = ("option -- ", "usage: ssh-keygen", "Unsupported operation")


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """The outcome of checking a bundle's signature; a failed check is a finding, not an error.

    ``identity`` and ``fingerprint`` (``SHA256:…``) are set only when ``verified``; ``reason``
    always says why, in one line.
    """

    verified: bool
    identity: str | None
    fingerprint: str | None
    reason: str


class _Refused(Exception):
    """A file that must not be read as asked (missing, a symlink, not a regular file, too big)."""


def sign_manifest(bundle: Path, key: Path, *, force: bool = False) -> Path:
    """Sign ``bundle/manifest.json`` with ``key``; returns the path of the signature written.

    ``key`` is a private key file, or a public one (``KEY.pub``) whose private half is in
    ``ssh-agent``. An existing signature is replaced only with ``force``. The signature is made
    on a private copy of the manifest and moved into place whole, so a failed signing leaves the
    bundle as it was.

    Example:
        >>> sign_manifest(Path("bundle"), Path("~/.ssh/id_ed25519").expanduser())  # doctest: +SKIP
        PosixPath('bundle/manifest.json.sig')
    """
    try:
        _check_bundle(bundle)
        manifest = _read_regular(bundle / MANIFEST_FILE, cap=None)
        signature = bundle / SIGNATURE_FILE
        present = _lexists_regular(signature)
    except _Refused as e:
        raise UserError(f"cannot sign {bundle}: {e}") from None
    if present and not force:
        raise UserError(f"{bundle} is already signed; --force to replace {SIGNATURE_FILE}")
    if not key.is_file():
        raise UserError(
            f"signing key not found: {key}",
            hint="pass a private key file, or KEY.pub with the key loaded in ssh-agent",
        )
    keygen = _keygen()
    if keygen is None:
        raise UserError("ssh-keygen not found", hint="install OpenSSH 8.2 or newer")
    with tempfile.TemporaryDirectory(prefix="evalsi-sign-") as private:
        copy = Path(private) / MANIFEST_FILE
        copy.write_bytes(manifest)
        argv = [keygen, "-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(copy)]
        try:
            done = _run(argv, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError(
                f"ssh-keygen did not finish signing within {TIMEOUT_SECONDS:g} s",
                hint="an agent that asks to confirm each use (ssh-add -c) needs someone to confirm",
            ) from None
        if done.returncode != 0:
            raise _sign_failure(key, done.stderr)
        try:
            sig = _read_regular(Path(private) / SIGNATURE_FILE, cap=SIGNATURE_CAP)
        except _Refused as e:
            raise UserError(f"ssh-keygen wrote no usable signature: {e}") from None
    if not sig.startswith(_ARMOR):
        raise UserError("ssh-keygen wrote something that is not an SSH signature")
    _install(bundle, sig, replace=force)
    return signature


def verify_signature(bundle: Path, allowed_signers: Path) -> SignatureCheck:
    """Check ``bundle/manifest.json.sig`` against the keys in an allowed-signers file.

    Raises ``UserError`` only when ``allowed_signers`` cannot be read; anything wrong with the
    bundle's signature (missing, garbage, a stranger's key, a changed manifest) is reported as a
    ``SignatureCheck`` that is not verified.

    Example:
        >>> verify_signature(Path("bundle"), Path("allowed_signers")).verified  # doctest: +SKIP
        True
    """
    try:
        with allowed_signers.open("rb") as f:
            f.read(1)
    except OSError as e:
        raise UserError(
            f"cannot read allowed-signers file {allowed_signers}: {e.strerror or e}",
            hint='one line per key: PRINCIPAL [namespaces="evalsi-bundle"] KEYTYPE KEY',
        ) from None
    keygen = _keygen()
    if keygen is None:
        return _unverified("ssh-keygen not found")
    try:
        _check_bundle(bundle)
        signature = bundle / SIGNATURE_FILE
        if not os.path.lexists(signature):
            return _unverified(f"no signature ({SIGNATURE_FILE})")
        sig = _read_regular(signature, cap=SIGNATURE_CAP)
        manifest_fd = _open_regular(bundle / MANIFEST_FILE)
    except _Refused as e:
        return _unverified(str(e))
    try:
        with tempfile.TemporaryDirectory(prefix="evalsi-verify-") as private:
            # ssh-keygen reads the bytes checked above, not a file that may change meanwhile.
            sig_copy = Path(private) / SIGNATURE_FILE
            sig_copy.write_bytes(sig)
            return _verify(keygen, sig_copy, manifest_fd, allowed_signers)
    finally:
        os.close(manifest_fd)


def _verify(keygen: str, sig: Path, manifest_fd: int, allowed: Path) -> SignatureCheck:
    find = [keygen, "-Y", "find-principals", "-s", str(sig), "-f", str(allowed)]
    try:
        found = _run(find, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return _unverified(f"ssh-keygen timed out after {TIMEOUT_SECONDS:g} s")
    principals = found.stdout.decode("utf-8", "replace").splitlines()
    if found.returncode != 0 or not principals or not principals[0].strip():
        return _unverified(f"no allowed signer made this signature: {_summary(found.stderr)}")
    identity = principals[0].strip()
    check = [keygen, "-Y", "verify", "-f", str(allowed), "-I", identity, "-n", NAMESPACE]
    try:
        done = _run([*check, "-s", str(sig)], stdin=manifest_fd)
    except subprocess.TimeoutExpired:
        return _unverified(f"ssh-keygen timed out after {TIMEOUT_SECONDS:g} s")
    if done.returncode != 0:
        return _unverified(f"signature for {identity} does not verify: {_summary(done.stderr)}")
    good = _GOOD.search(done.stdout.decode("utf-8", "replace"))
    if good is None:
        return _unverified(f"unexpected ssh-keygen output: {_summary(done.stdout)}")
    return SignatureCheck(
        verified=True,
        identity=identity,
        fingerprint=good.group(2),
        reason=f"good {NAMESPACE!r} signature for {identity} with {good.group(1)} key",
    )


def _unverified(reason: str) -> SignatureCheck:
    return SignatureCheck(verified=False, identity=None, fingerprint=None, reason=reason)


def _keygen() -> str | None:
    return shutil.which("ssh-keygen")


def _run(argv: list[str], *, stdin: int) -> subprocess.CompletedProcess[bytes]:
    """Run ssh-keygen where it cannot ask anyone anything.

    A new session has no controlling terminal, so ``/dev/tty`` cannot be opened for a prompt;
    ``SSH_ASKPASS_REQUIRE=never`` without ``DISPLAY`` rules out a graphical one.
    ``SSH_AUTH_SOCK`` passes through: signing with ``KEY.pub`` goes through the agent.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["SSH_ASKPASS_REQUIRE"] = "never"
    return subprocess.run(
        argv,
        stdin=stdin,
        capture_output=True,
        env=env,
        timeout=TIMEOUT_SECONDS,
        start_new_session=True,
        check=False,
    )


def _sign_failure(key: Path, stderr: bytes) -> UserError:
    text = stderr.decode("utf-8", "replace")
    if any(marker in text for marker in _TOO_OLD):
        return UserError(
            "this ssh-keygen cannot sign files (no -Y sign)",
            hint="install OpenSSH 8.2 or newer",
        )
    if "passphrase" in text.lower():
        return UserError(
            f"the key {key} has a passphrase, and signing never prompts for one",
            hint=f"load it into ssh-agent (ssh-add {key}) and pass its public half: {key}.pub",
        )
    return UserError(f"ssh-keygen could not sign with {key}: {_summary(stderr)}")


def _summary(output: bytes) -> str:
    """ssh-keygen's messages as one bounded line (its banners of '@' dropped)."""
    lines = []
    for raw in output.decode("utf-8", "replace").splitlines():
        line = "".join(c if c.isprintable() else "?" for c in raw).strip()
        if line.strip("@ "):
            lines.append(line)
    text = "; ".join(lines) or "no message"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _check_bundle(bundle: Path) -> None:
    if bundle.is_symlink():
        raise _Refused(f"the bundle {bundle} is a symlink; refused")
    if not bundle.is_dir():
        raise _Refused(f"no bundle directory at {bundle}")


def _lexists_regular(path: Path) -> bool:
    """Whether ``path`` exists (refusing a symlink or anything but a regular file)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise _Refused(f"{path.name} is a symlink; refused")
    if not stat.S_ISREG(mode):
        raise _Refused(f"{path.name} is not a regular file")
    return True


def _open_regular(path: Path) -> int:
    """Open a regular file without following a symlink (or blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _Refused(f"no {path.name}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _Refused(f"{path.name} is a symlink; refused") from None
        raise _Refused(f"cannot read {path.name}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _Refused(f"{path.name} is not a regular file")
    return fd


def _read_regular(path: Path, *, cap: int | None) -> bytes:
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        if cap is None:
            return f.read()
        data = f.read(cap + 1)
    if len(data) > cap:
        raise _Refused(f"{path.name} is larger than {cap // 1024} KiB")
    return data


def _install(bundle: Path, sig: bytes, *, replace: bool) -> None:
    """Put the signature in place whole: a temporary file beside it, then rename or link."""
    fd, name = tempfile.mkstemp(prefix=f".{SIGNATURE_FILE}.", dir=bundle)
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(sig)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o644)
        if replace:
            os.replace(temp, bundle / SIGNATURE_FILE)
        else:
            # A link never replaces: a signature that appeared meanwhile is kept.
            os.link(temp, bundle / SIGNATURE_FILE)
    except FileExistsError:
        raise UserError(
            f"{bundle} is already signed; --force to replace {SIGNATURE_FILE}"
        ) from None
    except OSError as e:
        raise UserError(f"cannot write {bundle / SIGNATURE_FILE}: {e.strerror or e}") from None
    finally:
        temp.unlink(missing_ok=True)

"""TLS on every listener ``evalsi serve`` opens (``auth.tls``): hypercorn's (the main port and
the OTLP HTTP ports) and grpcio's (``server.grpcPort``, ``traces.otlp.grpcPort``), all from the
one certificate and key; with ``clientCaFile``, every client must show a certificate that CA
signed (mutual TLS), on every port alike.

The files are read and tried once, before anything listens: hypercorn loads them only after
the app's lifespan has started (a wrong file there is a page of tracebacks), and grpcio says
of a wrong one only that it failed to bind the address. Each problem here names the key and
the file.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any

from evalsi.auth import Tls
from evalsi.core import UserError

_SSL_LINE = re.compile(r" \(_ssl\.c:\d+\)")


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """``auth.tls`` read: the PEM bytes grpcio takes, and the paths hypercorn takes."""

    settings: Tls
    cert: bytes
    key: bytes
    client_ca: bytes | None


class _Encrypted(Exception):
    """The key file asked for a passphrase: evalsi serve has none to give."""


def _no_passphrase() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal and hang a service.
    raise _Encrypted


def load_tls(tls: Tls) -> TlsFiles:
    """``tls``'s files, each tried as what it is meant to be.

    Raises:
        UserError: a file that cannot be read, is not PEM of the right kind, a key that does
            not match the certificate or needs a passphrase.
    """
    cert = _read("certFile", tls.cert_file)
    key = _read("keyFile", tls.key_file)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_verify_locations(cadata=cert.decode("latin-1"))
    except (ssl.SSLError, ValueError) as e:
        raise _bad("certFile", tls.cert_file, "no PEM certificate in it", e) from e
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=_no_passphrase)
    except _Encrypted as e:
        raise _bad("keyFile", tls.key_file, "the key is encrypted (evalsi serve needs it "
                   "unencrypted, readable by the server only)", e) from e  # fmt: skip
    except (ssl.SSLError, OSError) as e:
        why = (
            f"not the private key of certFile {tls.cert_file}"
            if "KEY_VALUES_MISMATCH" in str(e)
            else "no PEM private key in it"
        )
        raise _bad("keyFile", tls.key_file, why, e) from e
    client_ca = None
    if tls.client_ca_file:
        client_ca = _read("clientCaFile", tls.client_ca_file)
        try:
            context.load_verify_locations(cadata=client_ca.decode("latin-1"))
        except (ssl.SSLError, ValueError) as e:
            raise _bad("clientCaFile", tls.client_ca_file, "no PEM CA certificate in it", e) from e
    return TlsFiles(tls, cert, key, client_ca)


def configure_hypercorn(hc: Any, files: TlsFiles) -> None:
    """TLS on every bind of hypercorn's ``Config`` ``hc``. hypercorn offers ALPN ``h2`` and
    ``http/1.1``, so gRPC (HTTP/2) and HTTP/1.1 clients share each port as in cleartext."""
    hc.certfile = files.settings.cert_file
    hc.keyfile = files.settings.key_file
    if files.settings.client_ca_file:
        hc.ca_certs = files.settings.client_ca_file
        hc.verify_mode = ssl.CERT_REQUIRED


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise _bad(key, path, e.strerror or str(e), None) from e


def _bad(key: str, path: str, why: str, cause: Exception | None) -> UserError:
    # OpenSSL's reason, without the line of CPython's _ssl.c it surfaced at.
    detail = f" ({_SSL_LINE.sub('', str(cause))})" if isinstance(cause, ssl.SSLError) else ""
    return UserError(
        f"auth.tls.{key}: cannot use {path}: {why}{detail}",
        hint="auth.tls wants PEM files: certFile the server's certificate (chain), keyFile "
        "its unencrypted private key, clientCaFile the CA that signs client certificates",
    )

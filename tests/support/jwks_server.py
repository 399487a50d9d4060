"""A real JWKS and OIDC discovery server on loopback for auth tests, and token minting.

The server runs in a thread (so it serves whichever event loop a test runs), counts the
requests per path, and lets a test rotate keys, change the discovery ``issuer``, fail with a
status, or serve any body. ``tls=True`` serves https with a fresh self-signed certificate for
127.0.0.1 that ``client_ssl`` trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
import time
import warnings
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from joserfc import jwt
from joserfc.errors import SecurityWarning
from joserfc.jwk import Key
from joserfc.jws import JWSRegistry
from joserfc.util import urlsafe_b64encode

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/jwks.json"


class JwksServer:
    """Serves ``jwks`` at ``/jwks.json`` and a discovery document naming it; ``/redirect``
    answers 302 to the key set. Use as a context manager."""

    def __init__(self, *keys: Key, tls: bool = False) -> None:
        self.jwks: dict[str, Any] = {"keys": []}
        self.set_keys(*keys)
        self.issuer: str | None = None  # the discovery document's issuer; None: ``url``
        self.jwks_uri: str | None = None  # the discovery document's jwks_uri; None: ours
        self.status = 200
        self.body: bytes | None = None  # served at /jwks.json instead of the key set
        self.send_length = True  # False: no Content-Length, the body ends when the socket does
        self.delay_s = 0.0  # before answering
        self.requests: Counter[str] = Counter()
        self.tls = tls
        self.client_ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_keys(self, *keys: Key) -> None:
        """Publish the public halves of ``keys`` (or any dicts put in ``jwks`` directly)."""
        self.jwks = {"keys": [k.as_dict(private=False) for k in keys]}

    @property
    def url(self) -> str:
        assert self._httpd is not None
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH

    @property
    def fetches(self) -> int:
        """Requests for the key set so far."""
        with self._lock:
            return self.requests[JWKS_PATH]

    def __enter__(self) -> JwksServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with server._lock:
                    server.requests[path] += 1
                status, body, headers = server._answer(path)
                time.sleep(server.delay_s)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if server.send_length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if self.tls:
            self._wrap_tls(self._httpd)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._httpd is not None
        assert self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _answer(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        json_type = {"Content-Type": "application/json"}
        if self.status != 200:
            return self.status, b"{}", json_type
        if path == DISCOVERY_PATH:
            doc = {
                "issuer": self.issuer if self.issuer is not None else self.url,
                "jwks_uri": self.jwks_uri or self.jwks_url,
            }
            return 200, json.dumps(doc).encode(), json_type
        if path == JWKS_PATH:
            body = self.body if self.body is not None else json.dumps(self.jwks).encode()
            return 200, body, json_type
        if path == "/redirect":
            return 302, b"", {"Location": self.jwks_url}
        return 404, b"", {}

    def _wrap_tls(self, httpd: ThreadingHTTPServer) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "cert.pem").write_bytes(cert_pem)
            (Path(tmp) / "key.pem").write_bytes(key_pem)
            context.load_cert_chain(Path(tmp) / "cert.pem", Path(tmp) / "key.pem")
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        self.client_ssl = ssl.create_default_context(cadata=cert_pem.decode())


def mint(key: Key, claims: dict[str, Any], alg: str, **header: Any) -> str:
    """A JWT signed by ``key`` with joserfc; the header's ``kid`` is the key's unless given
    (``kid=None`` leaves it out)."""
    fields = {"alg": alg, "kid": key.kid, **header}
    fields = {k: v for k, v in fields.items() if v is not None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)  # joserfc's RFC 9864 note on EdDSA
        return jwt.encode(fields, claims, key, algorithms=[alg])


def sign_raw(header: bytes, payload: bytes, key: Key, alg: str) -> str:
    """A compact JWS over exactly these header and payload bytes (for malformed-JSON cases
    that a JSON encoder would never write), signed by joserfc's ``alg``."""
    signing_input = urlsafe_b64encode(header) + b"." + urlsafe_b64encode(payload)
    signature = JWSRegistry.algorithms[alg].sign(signing_input, key)
    return (signing_input + b"." + urlsafe_b64encode(signature)).decode()

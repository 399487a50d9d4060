"""TLS on every listener ``evalsi serve`` opens (``auth.tls``), on real sockets with
certificates made here: HTTPS (HTTP/1.1 and HTTP/2 by ALPN, gRPC included) on the main port and
the OTLP HTTP port, grpcio's native ports over TLS, client certificates when ``clientCaFile`` is
set, the native OTLP port guarded like the others, and a wrong file stopping the start with a
message that names it."""

from __future__ import annotations

import asyncio
import datetime
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat
from evalsi._proto.grpc.health.v1 import health_pb2
from evalsi._proto.grpc.reflection.v1 import reflection_pb2
from evalsi.auth import key_hash
from evalsi.core import UserError
from evalsi.server import load_config
from evalsi.server._app import build_app
from evalsi.server._serve import run_servers
from evalsi.server._state import ServerConfig, ServerState
from tests.integration.test_int_otlp_sdk import sdk_spans
from tests.support.otlp_fixtures import genai_request
from tests.support.server_state import free_port, run_evalsi, server_state

KEYS = {"ingest-b": ("beta", "ingest"), "viewer-a": ("alpha", "viewer"), "owner": ("*", "owner")}
SECRET = {name: f"evk_tls{name.replace('-', '')}" + "x" * 30 for name in KEYS}
LIST_EVALUATORS = "/evalsi.v1alpha1.CatalogService/ListEvaluators"
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


# -- certificates ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Certs:
    """A CA, the server's certificate (127.0.0.1, ::1 and localhost) and a client's, as files;
    ``other_ca`` signed nothing here."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    usage: Any = None,
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, signer = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), False
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate | None, key: Any = None) -> Path:
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    tmp = tmp_path_factory.mktemp("certs")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("evalsi test CA", ca_key, None, ca=True)
    issuer = (ca.subject, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    server = _issue("evalsi", server_key, issuer, usage=ExtendedKeyUsageOID.SERVER_AUTH,
                    names=names)  # fmt: skip
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _issue("collector", client_key, issuer, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _issue("another CA", other_key, None, ca=True)
    return Certs(
        ca=_write(tmp / "ca.crt", ca),
        server_cert=_write(tmp / "server.crt", server),
        server_key=_write(tmp / "server.key", None, server_key),
        client_cert=_write(tmp / "client.crt", client),
        client_key=_write(tmp / "client.key", None, client_key),
        other_ca=_write(tmp / "other-ca.crt", other),
    )


# -- the server ------------------------------------------------------------------------------------
def _config_file(tmp: Path, tls: dict[str, str], **auth: Any) -> Path:
    keys = [
        {"name": n, "key": key_hash(SECRET[n]), "project": p, "role": r}
        for n, (p, r) in KEYS.items()
    ]
    doc = {
        "server": {"host": "127.0.0.1", "port": free_port(), "grpcPort": free_port()},
        "traces": {"otlp": {"grpcPort": free_port(), "httpPort": free_port()}},
        "projects": ["alpha", "beta"],
        "auth": {"apiKeys": {"keys": keys}, "tls": tls, **auth},
    }
    path = tmp / "evalsi.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def _tls(certs: Certs, *, client_certs: bool = False) -> dict[str, str]:
    tls = {"certFile": str(certs.server_cert), "keyFile": str(certs.server_key)}
    if client_certs:
        tls["clientCaFile"] = str(certs.ca)
    return tls


class Served:
    """``run_servers`` (what ``evalsi serve`` runs) in a thread until the block ends."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.config: ServerConfig = state.config
        self.app = build_app(state)
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    @property
    def otlp_grpc(self) -> int:
        port = self.config.traces.otlp.grpc_port
        assert port is not None
        return port

    @property
    def otlp_http(self) -> int:
        port = self.config.traces.otlp.http_port
        assert port is not None
        return port

    @property
    def native(self) -> int:
        assert self.config.grpc_port is not None
        return self.config.grpc_port

    def __enter__(self) -> Served:
        self._thread.start()
        # run_servers says "listening" once hypercorn's and grpcio's ports all accept.
        assert self._ready.wait(20), "the server did not start"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)
        self.state.store.close()
        assert self.error is None

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - the test reads it
            self.error = e
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        await run_servers(self.app, self.config, self._stop, listening=self._ready.set)


def _state(tmp: Path, config: ServerConfig) -> ServerState:
    fields = ("host", "port", "grpc_port", "auth", "traces")
    (tmp / "datasets").mkdir(exist_ok=True)
    return server_state(tmp, **{f: getattr(config, f) for f in fields})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tls")
    config = load_config(_config_file(tmp, _tls(certs)))
    with Served(_state(tmp, config)) as served:
        yield served


# -- clients ---------------------------------------------------------------------------------------
def _context(certs: Certs, *, client: bool = False, ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca or certs.ca))
    if client:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


def _https(
    url: str,
    context: ssl.SSLContext,
    credential: str | None = None,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    sent = {"content-type": "application/json", **(headers or {})}
    if credential:
        sent["authorization"] = f"Bearer {credential}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _channel(port: int, certs: Certs, *, client: bool = False, host: str = "127.0.0.1") -> Any:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certs.ca.read_bytes(),
        private_key=certs.client_key.read_bytes() if client else None,
        certificate_chain=certs.client_cert.read_bytes() if client else None,
    )
    return grpc.secure_channel(f"{host}:{port}", credentials)


def _rpc(channel: Any, path: str, request: Any, response: type[Any]) -> Callable[..., Any]:
    return channel.unary_unary(  # type: ignore[no-any-return]
        path, request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )  # fmt: skip


def _key(name: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {SECRET[name]}")]


def _code(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The status code ``call(*args, **kwargs)`` fails with."""
    with pytest.raises(grpc.RpcError) as e:
        call(*args, **kwargs)
    return e.value.code()


def _health(channel: Any) -> Callable[..., Any]:
    return _rpc(channel, "/grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest(),
                health_pb2.HealthCheckResponse)  # fmt: skip


def _list_evaluators(channel: Any) -> Callable[..., Any]:
    return _rpc(channel, LIST_EVALUATORS, cat.ListEvaluatorsRequest(),
                cat.ListEvaluatorsResponse)  # fmt: skip


# -- the main port and the OTLP HTTP port ----------------------------------------------------------
def test_https_verifies_against_the_ca_and_still_needs_a_key(server: Served, certs: Certs) -> None:
    context = _context(certs)
    for host in ("127.0.0.1", "localhost"):
        base = f"https://{host}:{server.config.port}"
        assert _https(base + "/v1alpha1/runs?projectId=alpha", context)[0] == 401
        status, body = _https(base + "/v1alpha1/runs?projectId=alpha", context, SECRET["viewer-a"])
        assert (status, body["runs"]) == (200, [])
    connect = f"https://127.0.0.1:{server.config.port}{LIST_EVALUATORS}"
    assert _https(connect, context, body={})[0] == 401
    status, body = _https(connect, context, SECRET["owner"], body={})
    assert status == 200
    assert "exact-match" in {e["ref"]["name"] for e in body["evaluators"]}
    # A client that does not trust this CA refuses the server: the certificate is checked.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _https(connect, _context(certs, ca=certs.other_ca), SECRET["owner"], body={})


def test_plaintext_to_a_tls_port_is_refused(server: Served) -> None:
    for port in (server.config.port, server.otlp_http):
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            _plain_get(port)


def _plain_get(port: int) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().read()
    finally:
        connection.close()


def test_http2_is_offered_by_alpn_and_grpc_works_over_it(server: Served, certs: Certs) -> None:
    context = _context(certs)
    context.set_alpn_protocols(["h2", "http/1.1"])
    with (
        socket.create_connection(("127.0.0.1", server.config.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.selected_alpn_protocol() == "h2"
    # grpcio speaks HTTP/2 only, and over TLS only if ALPN picked h2: hypercorn answers it.
    with _channel(server.config.port, certs) as channel:
        call = _list_evaluators(channel)
        assert _code(lambda: call(cat.ListEvaluatorsRequest(), timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        assert call(cat.ListEvaluatorsRequest(), metadata=_key("owner"), timeout=10).evaluators
        assert _health(channel)(health_pb2.HealthCheckRequest(), timeout=10).status == 1  # open


def test_otlp_http_port_is_tls_and_guarded(server: Served, certs: Certs) -> None:
    url = f"https://127.0.0.1:{server.otlp_http}/v1/traces"
    context = _context(certs)
    assert _https(url, context, body={"resourceSpans": []})[0] == 401
    assert _https(url, context, SECRET["ingest-b"], body={"resourceSpans": []})[0] == 200


# -- grpcio's ports --------------------------------------------------------------------------------
def test_native_grpc_port_over_tls(server: Served, certs: Certs) -> None:
    with _channel(server.native, certs, host="localhost") as channel:
        call = _list_evaluators(channel)
        assert _code(lambda: call(cat.ListEvaluatorsRequest(), timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        answer = call(cat.ListEvaluatorsRequest(), metadata=_key("owner"), timeout=10)
        assert "exact-match" in {e.ref.name for e in answer.evaluators}
        # The next call on the same connection is decided on its own credential (none).
        assert _code(lambda: call(cat.ListEvaluatorsRequest(), timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        assert _health(channel)(health_pb2.HealthCheckRequest(), timeout=10).status == 1  # open
        services = _list_services(channel)
        assert _code(lambda: services()) == grpc.StatusCode.UNAUTHENTICATED
        assert "evalsi.v1alpha1.CatalogService" in services(_key("owner"))
    with grpc.insecure_channel(f"127.0.0.1:{server.native}") as plain:
        assert _code(lambda: _list_evaluators(plain)(
            cat.ListEvaluatorsRequest(), metadata=_key("owner"), timeout=5
        )) == grpc.StatusCode.UNAVAILABLE  # fmt: skip


def _list_services(channel: Any) -> Callable[..., set[str]]:
    stream = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )

    def names(metadata: Any = None) -> set[str]:
        asked = iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        (answer,) = list(stream(asked, metadata=metadata, timeout=10))
        return {s.name for s in answer.list_services_response.service}

    return names


def _trace_ids(request: ExportTraceServiceRequest) -> set[str]:
    return {s.trace_id.hex() for s in request.resource_spans[0].scope_spans[0].spans}


def _stored(state: ServerState, project: str, trace_ids: set[str]) -> bool:
    traces = state.trace_store
    return all(traces.get_trace(project, t) is not None for t in trace_ids)


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 15
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_native_otlp_port_needs_a_key_and_writes_into_its_project(
    server: Served, certs: Certs
) -> None:
    with _channel(server.otlp_grpc, certs) as channel:
        export = _rpc(channel, TRACE_EXPORT, ExportTraceServiceRequest(),
                      ExportTraceServiceResponse)  # fmt: skip
        refused = genai_request(8, seed=1)
        assert _code(lambda: export(refused, timeout=10)) == grpc.StatusCode.UNAUTHENTICATED
        logs = _rpc(channel, LOGS_EXPORT, ExportLogsServiceRequest(), ExportLogsServiceResponse)
        assert _code(lambda: logs(ExportLogsServiceRequest(), timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        sent = genai_request(8, seed=2)
        export(sent, metadata=_key("ingest-b"), timeout=10)
        # Another project by header: only where the key may write traces (beta's key: not alpha).
        named = [*_key("ingest-b"), ("x-evalsi-project", "alpha")]
        assert _code(lambda: export(genai_request(8, seed=3), metadata=named, timeout=10)) == (
            grpc.StatusCode.NOT_FOUND
        )
        owned = genai_request(8, seed=4)
        export(owned, metadata=[*_key("owner"), ("x-evalsi-project", "alpha")], timeout=10)
    _wait(lambda: _stored(server.state, "beta", _trace_ids(sent)), "the spans in beta")
    _wait(lambda: _stored(server.state, "alpha", _trace_ids(owned)), "the owner's spans in alpha")
    assert not _stored(server.state, "default", _trace_ids(sent))
    assert not _stored(server.state, "alpha", _trace_ids(sent))
    for project in ("beta", "alpha", "default"):
        assert not any(server.state.trace_store.get_trace(project, t) for t in _trace_ids(refused))


def test_the_sdk_exporter_sends_over_tls_with_its_key(server: Served, certs: Certs) -> None:
    spans = sdk_spans()
    exporter = OTLPSpanExporter(
        endpoint=f"localhost:{server.otlp_grpc}",
        credentials=grpc.ssl_channel_credentials(certs.ca.read_bytes()),
        headers={"authorization": f"Bearer {SECRET['ingest-b']}"},
    )
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    trace_id = format(spans[0].context.trace_id, "032x")
    _wait(lambda: _stored(server.state, "beta", {trace_id}), "the SDK's spans in beta")


# -- client certificates, protected health ---------------------------------------------------------
def test_client_certificates_when_client_ca_is_set(tmp_path: Path, certs: Certs) -> None:
    config = load_config(_config_file(tmp_path, _tls(certs, client_certs=True), health="protected"))
    with Served(_state(tmp_path, config)) as server:
        url = f"https://127.0.0.1:{server.config.port}/v1alpha1/runs?projectId=alpha"
        # TLS 1.3: the server reads the (missing) certificate after the client's handshake is
        # done, so the refusal is an alert or a closed connection, whichever the client sees.
        with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
            _https(url, _context(certs), SECRET["viewer-a"])
        with_cert = _context(certs, client=True)
        assert _https(url, with_cert, SECRET["viewer-a"])[0] == 200
        assert _https(url, with_cert)[0] == 401  # a certificate is not an identity
        request = health_pb2.HealthCheckRequest()
        for port in (server.native, server.otlp_grpc):
            with _channel(port, certs) as channel:
                code = _code(_health(channel), request, timeout=5)
                assert code == grpc.StatusCode.UNAVAILABLE
        with _channel(server.native, certs, client=True) as channel:
            health = _health(channel)
            assert _code(lambda: health(request, timeout=10)) == grpc.StatusCode.UNAUTHENTICATED
            assert health(request, metadata=_key("viewer-a"), timeout=10).status == 1
        with _channel(server.otlp_grpc, certs, client=True) as channel:
            export = _rpc(channel, TRACE_EXPORT, ExportTraceServiceRequest(),
                          ExportTraceServiceResponse)  # fmt: skip
            export(ExportTraceServiceRequest(), metadata=_key("ingest-b"), timeout=10)


# -- a wrong file stops the start ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "content", "message"),
    [
        ("certFile", b"not a certificate\n", "no PEM certificate"),
        ("keyFile", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
         "no PEM private key"),
        ("keyFile", "another", "not the private key of certFile"),
        ("keyFile", "encrypted", "the key is encrypted"),
        ("clientCaFile", b"", "no PEM CA certificate"),
    ],
)  # fmt: skip
def test_a_wrong_tls_file_stops_the_start_naming_it(
    tmp_path: Path, certs: Certs, key: str, content: bytes | str, message: str
) -> None:
    tls = _tls(certs, client_certs=True)
    wrong = tmp_path / f"wrong-{key}.pem"
    if content == "another":  # a real key, of another certificate
        wrong.write_bytes(certs.client_key.read_bytes())
    elif content == "encrypted":  # the server's own key, behind a passphrase
        own = serialization.load_pem_private_key(certs.server_key.read_bytes(), None)
        encryption = serialization.BestAvailableEncryption(b"secret")
        wrong.write_bytes(
            own.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
            )
        )
    else:
        assert isinstance(content, bytes)
        wrong.write_bytes(content)
    tls[key] = str(wrong)
    config = load_config(_config_file(tmp_path, tls))
    state = _state(tmp_path, config)
    try:
        with pytest.raises(UserError, match=f"auth.tls.{key}: cannot use {wrong}: {message}"):
            asyncio.run(run_servers(build_app(state), config, asyncio.Event()))
    finally:
        state.store.close()
    # Nothing was left listening: every port is free again.
    for port in (config.port, config.grpc_port, config.traces.otlp.grpc_port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port or 0))


def test_evalsi_serve_reports_a_wrong_certificate_without_a_traceback(
    tmp_path: Path, certs: Certs
) -> None:
    wrong = tmp_path / "tls.crt"
    wrong.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    tls = {**_tls(certs), "certFile": str(wrong)}
    done = run_evalsi("serve", "--config", str(_config_file(tmp_path, tls)), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"auth.tls.certFile: cannot use {wrong}" in done.stderr
    assert "Traceback" not in done.stderr

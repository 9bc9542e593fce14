"""Issue 40 item 6: a callback goes only where its allowlist entry says, to the address that was checked.

The allowlist once let dot segments through (``/callbacks/../admin/delete-all`` was sent as
``/admin/delete-all``), any port when the entry named none, and resolved the name twice, once to check it and
once to connect (DNS rebinding). Each trick is tried here against the webhook activity itself, with real local
HTTP servers on 127.0.0.1 (allowed because the entries name that address, as the stack's tests do) and, for
rebinding, a fake DNS and route table in the ``socket`` module: a global address that the "network" carries to a
local stand-in server, and a second answer of 127.0.0.1 where an internal server waits.
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from structlog.testing import capture_logs
from temporalio.testing import ActivityEnvironment

from activities.notify import NotifyActivities
from stores.infra.outbound import OutboundRefused, check_callback, check_destination, parse_allowlist
from stores.platform import Platform
from workflows.contracts.erasure import StateEvent

PUBLIC = "93.184.215.14"  # a global address: what the name resolves to when it is checked
assert ipaddress.ip_address(PUBLIC).is_global
EVENT = StateEvent("er_outbound", "sk_x", "pending_approval", "approval", "2026-01-01T00:00:00Z", "")


@dataclass
class Server:
    """A local HTTP(S) server recording what reaches it (method, path, headers) and the TLS name asked for."""

    port: int
    received: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(tls: ssl.SSLContext | None = None) -> Server:
        record = Server(0)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                record.received.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda _sock, name, _ctx: record.sni.append(name)
            httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
        record.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return record

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def deliver(allowlist: str, url: str) -> tuple[int, list[MutableMapping[str, Any]]]:
    """The webhook activity telling one forwarded request's callback of ``EVENT``: (count told, log events)."""
    platform = SimpleNamespace(
        config=SimpleNamespace(webhook_urls=(), webhook_secret=b"", callback_allowlist=parse_allowlist(allowlist)),
        requests=SimpleNamespace(
            callbacks=lambda _rid: [{"url": url, "headers": {"Authorization": "cb"}, "uid": "u", "tenant": "t"}]
        ),
    )
    with capture_logs() as logs:
        told = ActivityEnvironment().run(NotifyActivities(cast(Platform, platform)).send_webhook, EVENT)
    return told, logs


# -- each trick, refused at intake with its reason -------------------------------------------------------------

ALLOW = parse_allowlist("https://hooks.example.com/callbacks, http://127.0.0.1:8099/callbacks")


@pytest.mark.parametrize(
    "path",
    [
        "/callbacks/../admin/delete-all",
        "/callbacks/./status",
        "/callbacks/x/..",
        "/callbacks/%2e%2e/admin/delete-all",
        "/callbacks/%2E%2e/admin",
        "/callbacks/.%2e/admin",
        "/callbacks/%2e./admin",
        "/callbacks/..%2fadmin",
        "/callbacks%2f..%2fadmin",
        "/callbacks/%252e%252e/admin",  # encoded twice
        "/callbacks/..\\admin",
        "/callbacks\\..\\admin",
        "/callbacks/.\t./admin",  # a tab the URL parser drops
        "/callbacks/..;/admin",  # a path parameter some servers strip
    ],
)
def test_dot_segments_and_encoded_paths_are_refused_with_their_reason(path: str) -> None:
    for base in ("https://hooks.example.com", "http://127.0.0.1:8099"):
        with pytest.raises(OutboundRefused, match=r"dot segment|encoded|backslash"):
            check_callback(base + path, {}, ALLOW)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com:8443/callbacks/status",
        "https://hooks.example.com:80/callbacks/status",
        "https://hooks.example.com:0/callbacks/status",
    ],
)
def test_a_port_the_entry_does_not_name_is_refused_with_its_reason(url: str) -> None:
    with pytest.raises(OutboundRefused, match="port"):
        check_callback(url, {}, ALLOW)


def test_an_entry_without_a_port_allows_the_schemes_default_and_one_with_a_port_exactly_that_port() -> None:
    check_callback("https://hooks.example.com/callbacks/status", {}, ALLOW)
    check_callback("https://hooks.example.com:443/callbacks/status", {}, ALLOW)
    check_callback("http://127.0.0.1:8099/callbacks/status", {}, ALLOW)
    for other in (8098, 8100, 80):
        with pytest.raises(OutboundRefused, match="port"):
            check_callback(f"http://127.0.0.1:{other}/callbacks/status", {}, ALLOW)


def test_an_allowlist_entry_with_a_dot_segment_is_a_configuration_error() -> None:
    with pytest.raises(OutboundRefused, match="allowlist entry"):
        parse_allowlist("https://hooks.example.com/callbacks/../admin")


# -- nothing is sent -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/callbacks/../admin/delete-all", "/callbacks/%2e%2e/admin/delete-all", "/callbacks/..%2fadmin"]
)
def test_a_dot_segment_callback_sends_nothing(serve: Any, path: str) -> None:
    server = serve()
    told, logs = deliver(f"http://127.0.0.1:{server.port}/callbacks", f"http://127.0.0.1:{server.port}{path}")
    assert server.received == []
    [refused] = [e for e in logs if e["event"] == "callback_refused"]
    assert "dot segment" in refused["reason"]
    assert told == 1  # dealt with: never retried


def test_a_port_the_entry_does_not_name_sends_nothing(serve: Any) -> None:
    server = serve()
    told, logs = deliver("http://127.0.0.1", f"http://127.0.0.1:{server.port}/hook")
    assert server.received == []
    [refused] = [e for e in logs if e["event"] == "callback_refused"]
    assert "port" in refused["reason"]
    assert told == 1


def test_an_entry_naming_the_port_delivers_to_it(serve: Any) -> None:
    server = serve()
    told, _logs = deliver(f"http://127.0.0.1:{server.port}", f"http://127.0.0.1:{server.port}/hook/status")
    assert told == 1
    [(method, path, headers)] = server.received
    assert (method, path, headers["authorization"]) == ("POST", "/hook/status", "cb")
    assert headers["host"] == f"127.0.0.1:{server.port}"


# -- DNS rebinding ---------------------------------------------------------------------------------------------


@dataclass
class Network:
    """``hooks.example.com`` answers ``PUBLIC`` the first time and 127.0.0.1 after; ``PUBLIC`` routes to a
    stand-in server. Patched into ``socket`` so every resolver and connector below it sees the same world."""

    standin_port: int
    answers: list[str] = field(default_factory=list)
    connected: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Any:
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.create_connection

    def install(standin_port: int) -> Network:
        net = Network(standin_port)

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if host != "hooks.example.com":
                return real_getaddrinfo(host, port, *args, **kwargs)
            answer = PUBLIC if not net.answers else "127.0.0.1"
            net.answers.append(answer)
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answer, int(port)))]

        def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            net.connected.append((str(address[0]), int(address[1])))
            if address[0] == PUBLIC:
                address = ("127.0.0.1", net.standin_port)
            return real_connect(address, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", create_connection)
        return net

    return install


def test_a_rebinding_name_is_connected_at_the_address_that_was_checked(serve: Any, network: Any) -> None:
    internal = serve()  # what 127.0.0.1 answers at the callback's port: must never be reached
    standin = serve()  # what the checked public address reaches
    net = network(standin.port)
    told, _logs = deliver(
        f"http://hooks.example.com:{internal.port}/callbacks", f"http://hooks.example.com:{internal.port}/callbacks/s"
    )
    assert internal.received == []
    assert net.answers == [PUBLIC]  # resolved once
    assert all(host == PUBLIC for host, _port in net.connected)
    [(_method, path, headers)] = standin.received
    assert path == "/callbacks/s"
    assert headers["host"] == f"hooks.example.com:{internal.port}"  # the name, not the address
    assert told == 1


def test_every_resolved_address_must_be_public(network: Any) -> None:
    network(1)

    def both(host: str, port: int) -> list[str]:
        return [PUBLIC, "10.0.0.7"]

    with pytest.raises(OutboundRefused, match="non-public"):
        check_destination("https://hooks.example.com/callbacks/s", ALLOW, resolve=both)
    pinned = check_destination("https://hooks.example.com/callbacks/s", ALLOW, resolve=lambda h, p: [PUBLIC])
    assert (pinned.address, pinned.host, pinned.port) == (PUBLIC, "hooks.example.com", 443)


# -- TLS: connected by address, verified by name ---------------------------------------------------------------


def _certificates(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for ``name`` from a throwaway CA, and a client context trusting it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "leaf.pem", tmp / "leaf.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


@pytest.mark.parametrize(("certified", "accepted"), [("hooks.example.com", True), ("other.example", False)])
def test_tls_is_connected_by_address_and_verified_by_name(
    serve: Any, network: Any, tmp_path: Path, certified: str, accepted: bool
) -> None:
    from stores.infra.outbound import post_callback

    server_tls, client_tls = _certificates(tmp_path, certified)
    standin = serve(server_tls)
    net = network(standin.port)
    allow = parse_allowlist("https://hooks.example.com:8443/callbacks")
    pinned = check_destination("https://hooks.example.com:8443/callbacks/s", allow)
    assert pinned.address == PUBLIC
    if accepted:
        reply = post_callback(pinned, b"{}", {"Authorization": "cb"}, verify=client_tls)
        assert reply.status_code == 204
        [(_method, path, headers)] = standin.received
        assert (path, headers["host"]) == ("/callbacks/s", "hooks.example.com:8443")
    else:
        with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|[Hh]ostname"):
            post_callback(pinned, b"{}", {"Authorization": "cb"}, verify=client_tls)
        assert standin.received == []
    assert standin.sni == ["hooks.example.com"]  # the name asked for, though the connection went to the address
    assert net.answers == [PUBLIC]
    assert net.connected == [(PUBLIC, 8443)]

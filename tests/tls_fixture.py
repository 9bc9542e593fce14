"""Test PKI and a TLS-terminating TCP proxy, for the TLS tests.

``make_pki`` writes a CA, a server certificate for 127.0.0.1/localhost, a client certificate (mTLS) and a
second, unrelated CA (what a client that trusts the wrong root has), all generated with ``cryptography``.
``TlsProxy`` accepts TLS on a loopback port (optionally requiring a client certificate signed by the CA)
and forwards the plain bytes to an upstream port: in front of the Temporal dev server (which cannot
serve TLS itself), SeaweedFS's S3 gateway and the KMS endpoint. It runs its own event loop in a thread,
so blocking calls in the test never stall it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import ssl
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here
    ca_key: Path  # to issue another client certificate (a rotation)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, cn: str, *, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("erasure test CA")
    server_key, server = _leaf(ca_key, ca, "localhost", server=True)
    client_key, client = _leaf(ca_key, ca, "erasure-worker", server=False)
    _other_key, other = _ca("some other CA")
    pki = Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
        other_ca=directory / "other-ca.pem",
        ca_key=directory / "ca-key.pem",
    )
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.server_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    pki.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    pki.other_ca.write_bytes(other.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, pki.server_key)
    _write_key(client_key, pki.client_key)
    _write_key(ca_key, pki.ca_key)
    return pki


def issue_client(pki: Pki, cert_path: Path, key_path: Path) -> int:
    """A new client certificate from the test CA, written over ``cert_path`` and ``key_path`` the way a
    secret volume is updated (each file replaced whole); its serial number."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    key, cert = _leaf(ca_key, ca, "erasure-worker", server=False)
    for path, write in (
        (key_path, lambda p: _write_key(key, p)),
        (cert_path, lambda p: p.write_bytes(cert.public_bytes(serialization.Encoding.PEM))),
    ):
        fresh = path.with_name(path.name + ".new")
        write(fresh)
        os.replace(fresh, path)
    return cert.serial_number


class TlsProxy:
    """TLS on ``127.0.0.1:<port>`` in front of a plain TCP upstream; counts handshakes that failed."""

    def __init__(self, pki: Pki, upstream_port: int, *, require_client_cert: bool, alpn: list[str]) -> None:
        self.upstream_port = upstream_port
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        if require_client_cert:
            context.load_verify_locations(pki.ca)
            context.verify_mode = ssl.CERT_REQUIRED
        if alpn:
            context.set_alpn_protocols(alpn)
        self._context = context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0
        self.connections = 0
        self.peer_serials: list[int] = []  # the client certificate of each accepted connection
        self._refused: set[int] = set()
        self._open: dict[int, set[asyncio.StreamWriter]] = {}

    def start(self) -> TlsProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        peer = writer.get_extra_info("peercert") or {}
        serial = int(peer["serialNumber"], 16) if "serialNumber" in peer else None
        if serial is None:
            await self._bridge(reader, writer)
            return
        self.peer_serials.append(serial)
        if serial in self._refused:
            writer.close()
            return
        self._open.setdefault(serial, set()).add(writer)
        try:
            await self._bridge(reader, writer)
        finally:
            self._open[serial].discard(writer)

    def refuse(self, serial: int) -> None:
        """Close every connection made with the client certificate ``serial`` and refuse new ones (a
        certificate the server no longer accepts)."""

        async def close() -> None:
            self._refused.add(serial)
            for writer in list(self._open.get(serial, ())):
                writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)

    async def _bridge(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ssl.SSLError):
                pass
            finally:
                with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
                    dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:  # open connections: closed with the proxy
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> TlsProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


class PostgresTlsProxy(TlsProxy):
    """Postgres's own TLS in front of a plain server: TLS is negotiated inside the protocol (an SSLRequest
    answered with ``S``, then the handshake), so a plain HTTPS-style proxy cannot stand in. A startup
    without TLS is refused, like a server whose pg_hba allows ``hostssl`` only."""

    def __init__(self, pki: Pki, upstream_port: int) -> None:
        super().__init__(pki, upstream_port, require_client_cert=False, alpn=[])
        self.refused_plain = 0

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._negotiate, "127.0.0.1", 0)

    async def _negotiate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                length, code = struct.unpack("!II", await reader.readexactly(8))
                if (length, code) == (8, GSSENC_REQUEST):
                    writer.write(b"N")  # no GSSAPI encryption here: the client goes on to SSLRequest
                    await writer.drain()
                    continue
                break
            if (length, code) != (8, SSL_REQUEST):
                self.refused_plain += 1
                writer.close()
                return
            writer.write(b"S")
            await writer.drain()
            await writer.start_tls(self._context)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
                writer.close()
            return
        await self._bridge(reader, writer)

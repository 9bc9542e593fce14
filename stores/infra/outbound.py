"""Outbound calls a caller asked for (a forwarded request's status callbacks): only where configured.

A privacy-request platform that forwards a request names URLs to tell of its progress, with headers. Left
open, that lets any requester token make the worker POST, with headers of its choosing, to any address the
worker can reach (an internal service, the cloud metadata endpoint). So:

- a callback URL must fall under an entry of the allowlist (``ERASURE_CALLBACK_ALLOWED_URLS``): same scheme
  and host, the entry's path as a prefix, and the entry's port, or the scheme's default port when the entry
  names none; no user info, no fragment;
- its path is taken literally or not at all: no dot segment, no percent-encoding, no backslash, no ``;``
  (issue 40: ``/callbacks/../admin`` was sent as ``/admin``, and a server decodes ``%2e%2e`` or ``%2f`` into a
  traversal the prefix check never saw), and the path httpx would send must be the one checked;
- its headers are a fixed set (``CALLBACK_HEADERS``: the platform's own ``Authorization``), anything else is
  refused at intake, before anything is filed;
- at delivery the host is resolved once and every address must be public, unless the allowlist entry names
  that address itself (an IP literal): a name that resolves to a private, loopback or link-local address is
  refused, whatever the allowlist says of the name. The request then goes to the address that was checked
  (``post_callback``), the name kept in ``Host`` and in TLS (SNI and the certificate check), so a name that
  answers a public address to the check and a local one to the connection (DNS rebinding) reaches nothing
  local; redirects are never followed, and no proxy from the environment is used (a proxy would resolve
  the name again).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

#: the only headers a callback may carry (lower case): its platform's credentials
CALLBACK_HEADERS = frozenset({"authorization"})

#: the port a URL of each scheme has when it names none: the only one an entry without a port allows
DEFAULT_PORTS = {"http": 80, "https": 443}

#: a resolver: the addresses (as text) a host name has, for a port; ``OSError`` when it has none
Resolver = Callable[[str, int], Sequence[str]]

_PRINTABLE = re.compile(r"[\x21-\x7e]*")  # no space, control or non-ASCII (a parser drops tabs and newlines)
_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,=:@/]*")  # RFC 3986 path characters less "%" and ";"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(ValueError):
    """An outbound URL or header the configuration does not allow; nothing was sent."""


@dataclass(frozen=True)
class Destination:
    """A callback checked right before sending: connect to ``address`` (the one checked) at ``port``, naming
    ``host``."""

    url: str
    host: str
    address: str
    port: int


def parse_allowlist(value: str) -> tuple[str, ...]:
    """The comma-separated setting as a tuple of entries, each checked to be an http(s) URL with a plain path."""
    entries = tuple(e.strip() for e in value.split(",") if e.strip())
    for entry in entries:
        parts = urlsplit(entry)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.username or parts.query:
            raise OutboundRefused(f"callback allowlist entry {entry!r} must be an http(s) URL without user or query")
        if _path_refusal(entry, parts.path):
            raise OutboundRefused(f"callback allowlist entry {entry!r} must have a plain path (no dot segment or %)")
    return entries


def _path_refusal(url: str, path: str) -> str | None:
    if not _PRINTABLE.fullmatch(url) or "\\" in url:
        return "callback URL has a backslash, whitespace or a non-ASCII character (a dot segment in disguise)"
    if not _PATH.fullmatch(path):
        return "callback path is percent-encoded or has a ';' (a dot segment or slash in disguise)"
    if any(segment and not segment.strip(".") for segment in path.split("/")):
        return "callback path has a dot segment ('.' or '..')"
    return None


def allowed_entry(url: str, allowlist: Iterable[str]) -> str:
    """The allowlist entry ``url`` falls under; ``OutboundRefused`` with the reason (never the URL's path or
    secrets) otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OutboundRefused("callback URL is malformed (its port?)") from None
    host = parts.hostname or "?"
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc or parts.fragment:
        raise OutboundRefused(f"callback host {host} is not in ERASURE_CALLBACK_ALLOWED_URLS")
    refusal = _path_refusal(url, parts.path)
    if refusal is None and httpx.URL(url).raw_path.split(b"?", 1)[0].decode() != (parts.path or "/"):
        refusal = "callback path would be rewritten before sending"
    if refusal:
        raise OutboundRefused(f"{refusal}; refused")
    effective = port if port is not None else DEFAULT_PORTS[parts.scheme]
    other_port = False
    for entry in allowlist:
        allowed = urlsplit(entry)
        if allowed.scheme != parts.scheme or (allowed.hostname or "").lower() != host.lower():
            continue
        prefix = allowed.path.rstrip("/")
        if prefix and not (parts.path == prefix or parts.path.startswith(prefix + "/")):
            continue
        if (allowed.port if allowed.port is not None else DEFAULT_PORTS[allowed.scheme]) != effective:
            other_port = True
            continue
        return entry
    if other_port:
        raise OutboundRefused(
            f"callback port {effective} of host {host} is not the port its ERASURE_CALLBACK_ALLOWED_URLS entry "
            f"names (an entry naming none allows only {parts.scheme}'s default, {DEFAULT_PORTS[parts.scheme]})"
        )
    raise OutboundRefused(f"callback host {host} is not in ERASURE_CALLBACK_ALLOWED_URLS")


def check_callback(url: str, headers: Mapping[str, str], allowlist: Iterable[str]) -> None:
    """Refuse (``OutboundRefused``, a reason without the URL's secrets) a callback the settings do not allow."""
    allowed_entry(url, allowlist)
    extra = sorted(h for h in headers if h.lower() not in CALLBACK_HEADERS)
    if extra:
        raise OutboundRefused(f"callback headers may only be {', '.join(sorted(CALLBACK_HEADERS))} (got {extra})")


def resolve_host(host: str, port: int) -> list[str]:
    """The system resolver's addresses for ``host``, in its order, each once."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _public(address: Address) -> bool:
    """Global, and so is any IPv4 address it carries (mapped, NAT64, 6to4, Teredo) to a translator."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and not embedded.is_global:
            return False
    return address.is_global


def check_destination(url: str, allowlist: Iterable[str], resolve: Resolver = resolve_host) -> Destination:
    """Right before sending: the callback is still allowed, and its host resolves (once) to public addresses
    only, unless the allowlist entry names the address itself. The first address is the one to connect to."""
    entry = allowed_entry(url, allowlist)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port if parts.port is not None else DEFAULT_PORTS[parts.scheme]
    named = _literal(urlsplit(entry).hostname or "")
    try:
        addresses = [ipaddress.ip_address(a) for a in resolve(host, port)]
    except (OSError, ValueError):
        raise OutboundRefused(f"callback host {host} does not resolve") from None
    if not addresses:
        raise OutboundRefused(f"callback host {host} does not resolve")
    for address in addresses:
        if not _public(address) and address != named:
            raise OutboundRefused(f"callback host {host} resolves to a non-public address; refused")
    return Destination(url=url, host=host, address=str(addresses[0]), port=port)


def post_callback(
    destination: Destination,
    content: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float = 10.0,
    verify: ssl.SSLContext | bool = True,
) -> httpx.Response:
    """POST to the address that was checked, never a second resolution of the name: the URL's host replaced by
    the address, the name sent as ``Host`` and as the TLS server name (SNI, and the certificate is verified
    against it). An explicit transport keeps proxies from the environment out; redirects are not followed."""
    target = httpx.URL(destination.url)
    extensions = {}
    if target.scheme == "https" and _literal(destination.host) is None:
        extensions["sni_hostname"] = destination.host
    sent = {k: v for k, v in headers.items() if k.lower() != "host"}
    sent["Host"] = target.netloc.decode("ascii")
    transport = httpx.HTTPTransport(verify=verify)
    with httpx.Client(transport=transport, timeout=timeout, follow_redirects=False) as client:
        return client.post(
            target.copy_with(host=destination.address), content=content, headers=sent, extensions=extensions
        )

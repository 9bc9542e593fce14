"""Outbound calls a caller asked for (a forwarded request's status callbacks): only where configured.

A privacy-request platform that forwards a request names URLs to tell of its progress, with headers. Left
open, that lets any requester token make the worker POST, with headers of its choosing, to any address the
worker can reach (an internal service, the cloud metadata endpoint). So:

- a callback URL must fall under an entry of the allowlist (``ERASURE_CALLBACK_ALLOWED_URLS``): same scheme
  and host, the entry's port when it names one, the entry's path as a prefix; no user info, no fragment;
- its headers are a fixed set (``CALLBACK_HEADERS``: the platform's own ``Authorization``), anything else is
  refused at intake, before anything is filed;
- at delivery the host is resolved and every address must be public, unless the allowlist entry names that
  address itself (an IP literal): a name that resolves to a private, loopback or link-local address is
  refused, whatever the allowlist says of the name; redirects are never followed (the caller sets that).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

#: the only headers a callback may carry (lower case): its platform's credentials
CALLBACK_HEADERS = frozenset({"authorization"})


class OutboundRefused(ValueError):
    """An outbound URL or header the configuration does not allow; nothing was sent."""


def parse_allowlist(value: str) -> tuple[str, ...]:
    """The comma-separated setting as a tuple of entries, each checked to be an http(s) URL."""
    entries = tuple(e.strip() for e in value.split(",") if e.strip())
    for entry in entries:
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.query:
            raise OutboundRefused(f"callback allowlist entry {entry!r} must be an http(s) URL without user or query")
    return entries


def _entry_for(url: str, allowlist: Iterable[str]) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc or parts.fragment:
        return None
    for entry in allowlist:
        allowed = urlsplit(entry)
        if allowed.scheme != parts.scheme or (allowed.hostname or "").lower() != parts.hostname.lower():
            continue
        if allowed.port is not None and allowed.port != port:
            continue
        prefix = allowed.path.rstrip("/")
        if prefix and not (parts.path == prefix or parts.path.startswith(prefix + "/")):
            continue
        return entry
    return None


def check_callback(url: str, headers: Mapping[str, str], allowlist: Iterable[str]) -> None:
    """Refuse (``OutboundRefused``, a reason without the URL's secrets) a callback the settings do not allow."""
    if _entry_for(url, allowlist) is None:
        host = urlsplit(url).hostname or "?"
        raise OutboundRefused(f"callback host {host} is not in ERASURE_CALLBACK_ALLOWED_URLS")
    extra = sorted(h for h in headers if h.lower() not in CALLBACK_HEADERS)
    if extra:
        raise OutboundRefused(f"callback headers may only be {', '.join(sorted(CALLBACK_HEADERS))} (got {extra})")


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_destination(url: str, allowlist: Iterable[str]) -> None:
    """Right before sending: the callback is still allowed, and its host resolves to public addresses only,
    unless the allowlist entry names the address itself."""
    entry = _entry_for(url, allowlist)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if entry is None:
        raise OutboundRefused(f"callback host {host or '?'} is not in ERASURE_CALLBACK_ALLOWED_URLS")
    named = _literal(urlsplit(entry).hostname or "")
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError:
        raise OutboundRefused(f"callback host {host} does not resolve") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global and address != named:
            raise OutboundRefused(f"callback host {host} resolves to a non-public address; refused")

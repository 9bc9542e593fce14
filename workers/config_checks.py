"""Checks of setting values that pydantic's types cannot express: URLs, ``host:port`` addresses and PEM files.

Each check returns ``None`` or the reason a value is refused, worded to follow the variable's name in one line
("ERASURE_S3_ENDPOINT must be an http(s) URL ..."). A reason never quotes a secret (pass ``secret=True``) nor
a file's contents; a PEM file is named by its path only.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_pem_private_key

_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
_ADDRESS = re.compile(rf"{_HOST}:(\d{{1,5}})")


def _schemes_text(schemes: Collection[str]) -> str:
    ordered = sorted(schemes)
    if set(ordered) == {"http", "https"}:
        return "an http(s) URL"
    return f"a {' or '.join(f'{s}://' for s in ordered)} URL"


def url_problem(
    value: str,
    *,
    schemes: Collection[str],
    words: Collection[str] = (),
    origin_only: bool = False,
    no_user_or_query: bool = False,
    host_required: bool = True,
    hostless_schemes: Collection[str] = (),
    expected: str = "",
    secret: bool = False,
) -> str | None:
    """Why ``value`` is not a URL with one of ``schemes``, a host and a port in 1..65535 if named (``None``:
    it is, or it is empty, or one of the special ``words`` such as ``aws`` or ``none``). ``expected`` replaces
    the generated "an http(s) URL ..." of the reason."""
    if not value or value in words:
        return None
    if not expected:
        expected = _schemes_text(schemes).replace(" URL", " origin (scheme://host[:port])" if origin_only else " URL")
        if words:
            expected += " or " + " or ".join(f"'{w}'" for w in sorted(words))
    shown = "" if secret else f", got {value!r}"

    def refuse(why: str) -> str:
        return f"must be {expected} ({why}){shown}"

    if any(c.isspace() for c in value):
        return refuse("it holds a space")
    if "://" not in value:
        return refuse("it has no scheme")
    bad_port = "its port is not in 1..65535 or its host is malformed"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # its text may quote the value: never passed on
        return refuse(bad_port)
    if parts.scheme.lower() not in schemes:
        return refuse(f"its scheme {parts.scheme!r} is not allowed" if not secret else "its scheme is not allowed")
    if host_required and not parts.hostname and parts.scheme.lower() not in hostless_schemes:
        return refuse("it has no host")
    if port == 0:
        return refuse(bad_port)
    if origin_only and (parts.path not in ("", "/") or parts.query or parts.fragment):
        return refuse("it has a path, query or fragment")
    if (origin_only or no_user_or_query) and (parts.username is not None or parts.query):
        return refuse("it has a user or a query")
    return None


def address_problem(value: str) -> str | None:
    """Why ``value`` is not ``host:port`` (a Temporal frontend's gRPC address; no scheme)."""
    if not value:
        return None
    matched = _ADDRESS.fullmatch(value)
    if matched is None or not 1 <= int(matched.group(1)) <= 65535:
        return f"must be host:port with a port in 1..65535 (no scheme, no path), got {value!r}"
    return None


def _read(path: str) -> tuple[bytes | None, str | None]:
    try:
        return Path(path).read_bytes(), None
    except OSError as exc:
        return None, f"cannot be read: {path} ({exc.strerror or type(exc).__name__})"


def pem_certificates_problem(path: str, *, words: Collection[str] = ()) -> str | None:
    """Why ``path`` is not a readable file of one or more PEM certificates (a CA bundle or a certificate)."""
    if not path or path in words:
        return None
    data, problem = _read(path)
    if data is None:
        return problem
    blocks = [_BEGIN + b for b in data.split(_BEGIN)[1:]]
    with warnings.catch_warnings():  # a system bundle's old certificates (negative serials) only warn
        warnings.simplefilter("ignore")
        if not any(_certificate(block) for block in blocks):
            return f"is not a PEM certificate file: {path}"
    return None


_BEGIN = b"-----BEGIN CERTIFICATE-----"


def _certificate(block: bytes) -> bool:
    try:
        x509.load_pem_x509_certificate(block)
    except ValueError:
        return False
    return True


def pem_private_key_problem(path: str) -> str | None:
    """Why ``path`` is not a readable, unencrypted PEM private key (the SDK takes no password)."""
    if not path:
        return None
    data, problem = _read(path)
    if data is None:
        return problem
    try:
        load_pem_private_key(data, password=None)
    except TypeError:  # "password was not given but private key is encrypted"
        return f"is an encrypted private key (give it unencrypted, as a mounted secret): {path}"
    except (ValueError, UnsupportedAlgorithm):
        return f"is not a PEM private key file: {path}"
    return None

"""Identifiers: validation, the pseudonymous subject key, and collision-free storage keys.

Raw ids are treated as opaque exact strings (no case folding, no Unicode normalisation, no trimming: a
user id is whatever the platform stored, surrounding spaces, non-breaking spaces and code points newer than
this Python's Unicode tables included). Only ids no store can hold are refused: empty, longer than 256
characters, a NUL character (Postgres text cannot hold it) or a lone surrogate (not encodable as UTF-8).
Ids a shell would mangle are given exactly in hex (``decode_hex_id``). Storage keys encode every component
so that no user's prefix can ever match another user's (``bob`` vs ``bob/x``, ``bob%``, look-alikes are
different bytes).

Keys: one service secret, never used directly. HKDF derives a separate key per purpose (``derived_key``):
``subject-key`` (the pseudonymous subject key), ``token-digest`` (keyed hashes of words, for canaries) and
``request-store`` (sealing raw user ids while a request runs), ``session-digest`` and ``session-seal`` (session
ids in tombstones and the journal: a keyed hash to match, the id sealed for the sweeps' lookups), so no two
purposes share a key.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import unicodedata
from urllib.parse import quote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from stores.infra.errors import InvalidIdentifier

MAX_ID_LENGTH = 256
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SUBJECT_KEY_PREFIX = "sk_"


def validate_app_name(app_name: str) -> str:
    if not isinstance(app_name, str) or not _APP_NAME.match(app_name):
        raise InvalidIdentifier("app name must be 1-128 characters of letters, digits, '_', '.', '-'")
    return app_name


def validate_id(value: str, what: str = "user id") -> str:
    """``value`` unchanged, or ``InvalidIdentifier`` when no store could hold it (see the module docstring)."""
    if not isinstance(value, str) or not value:
        raise InvalidIdentifier(f"{what} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdentifier(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if "\x00" in value:
        raise InvalidIdentifier(f"{what} contains a NUL character, which no store can hold")
    if any(unicodedata.category(ch) == "Cs" for ch in value):
        raise InvalidIdentifier(f"{what} contains a lone surrogate, which is not encodable as UTF-8")
    return value


def decode_hex_id(value: str, what: str = "user id") -> str:
    """The exact id from its UTF-8 bytes in hex (for ids a shell or a form would trim or mangle)."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise InvalidIdentifier(f"{what} in hex must be an even number of hex digits") from None
    try:
        return validate_id(raw.decode("utf-8"), what)
    except UnicodeDecodeError:
        raise InvalidIdentifier(f"{what} in hex is not UTF-8") from None


def normalisation_variants(user_id: str) -> list[str]:
    """Other spellings a platform may hold for the same person: trimmed, NFC, NFD, NFKC (never the id itself)."""
    forms = [user_id.strip(), *(unicodedata.normalize(f, user_id) for f in ("NFC", "NFD", "NFKC"))]
    forms += [unicodedata.normalize("NFKC", user_id).strip()]
    return sorted({f for f in forms if f and f != user_id})


@functools.lru_cache(maxsize=64)
def derived_key(secret: bytes, purpose: str) -> bytes:
    """The key for one purpose, derived from the service secret with HKDF-SHA256 (label per purpose)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"erasure/{purpose}/v1".encode()).derive(secret)


def subject_key(secret: bytes, app_name: str, user_id: str) -> str:
    """HMAC-SHA256 of (app, user) under the subject-key key: the only identity the orchestrator uses.

    A user id of the subject key's own form (``sk_`` + 40 hex digits) is refused: stores file users' rows
    under their subject key, so such an id would name another user's rows (``subject_of_stored``)."""
    validate_app_name(app_name)
    validate_id(user_id)
    if is_subject_key(user_id):
        raise InvalidIdentifier("user ids of the form sk_ + 40 hex digits are reserved for subject keys")
    msg = app_name.encode() + b"\x00" + user_id.encode("utf-8")
    return SUBJECT_KEY_PREFIX + hmac.new(derived_key(secret, "subject-key"), msg, hashlib.sha256).hexdigest()[:40]


_SUBJECT_KEY = re.compile(r"^sk_[0-9a-f]{40}$")


def subject_of_stored(secret: bytes, app_name: str, stored: str) -> str:
    """The subject key of a ``user_id`` column value read from a store: the value itself when the row is
    filed under a subject key, else the key of the raw id it holds. Only for values read from storage: an id
    from a caller goes through ``subject_key``, which refuses the subject key's form."""
    if is_subject_key(stored):
        validate_app_name(app_name)
        return stored
    return subject_key(secret, app_name, stored)


def stored_user_ids(secret: bytes, app_name: str, user_id: str) -> list[str]:
    """What a store's ``user_id`` lookup column may hold for this user: the subject key (what this project's
    services write, so no raw id reaches a data file) and the raw id (plain google-adk, rows from before).
    Given a subject key (a value read from a store), just that key."""
    key = subject_of_stored(secret, app_name, user_id)
    return [key] if key == user_id else [key, user_id]


def is_subject_key(value: str) -> bool:
    """Whether ``value`` has a subject key's form (what the project's services file a user's rows under)."""
    return bool(_SUBJECT_KEY.match(value))


def validate_subject_key(value: str) -> str:
    if not is_subject_key(value):
        raise InvalidIdentifier("not a subject key")
    return value


def token_digest(secret: bytes, token: str) -> str:
    """Keyed hash of one normalised word: canaries and memory rows are compared through these."""
    return hmac.new(derived_key(secret, "token-digest"), token.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def key_part(value: str) -> str:
    """One storage-key component, fully percent-encoded (``/``, ``%``, ``*``, non-ASCII all escaped)."""
    return quote(value, safe="")


def session_digest(secret: bytes, subject: str, session_id: str) -> str:
    """A session named by keyed hash (``sd_`` + 40 hex): what tombstones, the request record and the journal
    hold instead of the session id."""
    msg = subject.encode() + b"\x00" + session_id.encode("utf-8")
    return "sd_" + hmac.new(derived_key(secret, "session-digest"), msg, hashlib.sha256).hexdigest()[:40]


def session_ref(subject: str, session_id: str) -> str:
    """A session named unambiguously: ADK session ids are unique per (app, user) only."""
    return f"{subject}:{session_id}"


def hash_or_none(secret: bytes, app_name: str, user_id: object) -> str | None:
    """The subject key of (app, user), or ``None`` for a value no identity could have (never raises)."""
    if not isinstance(user_id, str):
        return None
    try:
        return subject_key(secret, app_name, user_id)
    except (InvalidIdentifier, UnicodeError, ValueError, TypeError):
        return None

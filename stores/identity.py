"""Identifiers: validation, the pseudonymous subject key, and collision-free storage keys.

Raw ids are treated as opaque exact strings (no case folding, no Unicode normalisation: a user id is
whatever the platform stored). They are refused when they can never be valid: empty, too long, control
characters, or surrounding whitespace. Storage keys encode every component so that no user's prefix can
ever match another user's (``bob`` vs ``bob/x``, ``bob%``, look-alikes are different bytes).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from urllib.parse import quote

from stores.errors import InvalidIdentifier

MAX_ID_LENGTH = 256
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SUBJECT_KEY_PREFIX = "sk_"


def validate_app_name(app_name: str) -> str:
    if not isinstance(app_name, str) or not _APP_NAME.match(app_name):
        raise InvalidIdentifier("app name must be 1-128 characters of letters, digits, '_', '.', '-'")
    return app_name


def validate_id(value: str, what: str = "user id") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidIdentifier(f"{what} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdentifier(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if value != value.strip():
        raise InvalidIdentifier(f"{what} has leading or trailing whitespace")
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cs", "Cn") or ch in "\u2028\u2029":
            raise InvalidIdentifier(f"{what} contains a control, surrogate or unassigned character")
    return value


def subject_key(secret: bytes, app_name: str, user_id: str) -> str:
    """HMAC-SHA256 of (app, user) under the service secret: the only identity the orchestrator uses."""
    validate_app_name(app_name)
    validate_id(user_id)
    msg = app_name.encode() + b"\x00" + user_id.encode("utf-8")
    return SUBJECT_KEY_PREFIX + hmac.new(secret, msg, hashlib.sha256).hexdigest()[:40]


_SUBJECT_KEY = re.compile(r"^sk_[0-9a-f]{40}$")


def validate_subject_key(value: str) -> str:
    if not _SUBJECT_KEY.match(value):
        raise InvalidIdentifier("not a subject key")
    return value


def token_digest(secret: bytes, token: str) -> str:
    """Keyed hash of one normalised word: canaries and memory rows are compared through these."""
    return hmac.new(secret, b"tok\x00" + token.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def key_part(value: str) -> str:
    """One storage-key component, fully percent-encoded (``/``, ``%``, ``*``, non-ASCII all escaped)."""
    return quote(value, safe="")


def session_ref(subject: str, session_id: str) -> str:
    """A session named unambiguously: ADK session ids are unique per (app, user) only."""
    return f"{subject}:{session_id}"

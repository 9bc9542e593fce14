"""Small pieces every built-in adapter uses: digests for fingerprints, chunking, the subject test."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from stores.privacy.identity import hash_or_none

CHUNK = 500  # ids per statement: every id is its own index probe


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def chunks(items: Sequence[Any]) -> list[list[Any]]:
    return [list(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]


def belongs_to(secret: bytes, app_name: str, subject: str) -> Callable[[str], bool]:
    """Whether a stored user id is the subject's: the subject key itself (what the project's services write)
    or a raw id that hashes to it. Another user's malformed id is never the subject, never an error
    (counted by the caller where it matters)."""

    def belongs(user_id: str) -> bool:
        return user_id == subject or hash_or_none(secret, app_name, user_id) == subject  # a raw id is never key-shaped

    return belongs

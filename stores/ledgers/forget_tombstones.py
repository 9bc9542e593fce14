"""Item forgetting's tombstones: what blocks a forgotten item from being recalled or written again.

A forget tombstone covers one or more of a user's items at one strength:

- ``suppress``: hidden from recall and preload, kept, reversible (``lift``);
- ``forget``: the items are deleted and the tombstone blocks them (or text holding a forgotten span) from
  being written again: a re-ingested event, a summariser's output;
- ``erase_session``: one whole session of the user (its permanent session tombstone lives in the ledger);
  it also keeps keyed hashes of the whole normalised text of each memory that came from that session alone
  (``text_digests``), so the same content written back by another door (no session id, a new one) is refused.

It holds as little as possible: the subject key, the item ids, keyed hashes of the normalised forgotten
spans with their word counts, keyed hashes of ``user:`` state keys, the strength and the times. A text is
checked by hashing its word n-grams of the tombstones' span lengths (``TombstoneMatcher``), and its whole
normalised words against the text digests: an exact match on normalised words, never a substring of free
text, and no forgotten word kept in clear.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg_pool import ConnectionPool

from stores.privacy.embedding import WORD, tokens
from stores.privacy.identity import derived_key

STRENGTHS = ("suppress", "forget", "erase_session")
MAX_SPAN_WORDS = 12


class ForgetRefused(ValueError):
    """A forget that cannot be valid (unknown strength, nothing named, a span too long): nothing is written."""


def span_words(span: str) -> list[str]:
    return tokens(span)


def span_digest(secret: bytes, words: Sequence[str]) -> str:
    """Keyed hash of a normalised word sequence (lower-cased word tokens joined by one space)."""
    key = derived_key(secret, "forget-span")
    return hmac.new(key, " ".join(words).encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def text_digest(secret: bytes, words: Sequence[str]) -> str:
    """Keyed hash of a whole text's normalised words (apart from span digests: matched whole, never inside)."""
    key = derived_key(secret, "forget-text")
    return hmac.new(key, " ".join(words).encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def state_key_digest(secret: bytes, state_key: str) -> str:
    return hmac.new(derived_key(secret, "forget-state-key"), state_key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class ForgetTombstone:
    id: str
    subject_key: str
    app_name: str
    strength: str
    memory_ids: frozenset[str]
    span_digests: frozenset[str]
    span_lengths: frozenset[int]
    state_key_digests: frozenset[str]
    created_at: datetime
    lifted_at: datetime | None = None
    text_digests: frozenset[str] = frozenset()


def journal_form(t: ForgetTombstone) -> dict[str, Any]:
    """A tombstone as the lifecycle journal keeps it: ids and keyed hashes only."""
    return {
        "id": t.id,
        "subject_key": t.subject_key,
        "app_name": t.app_name,
        "strength": t.strength,
        "memory_ids": sorted(t.memory_ids),
        "span_digests": sorted(t.span_digests),
        "span_lengths": sorted(t.span_lengths),
        "state_key_digests": sorted(t.state_key_digests),
        "text_digests": sorted(t.text_digests),
        "created_at": t.created_at.isoformat(),
    }


@dataclass
class TombstoneMatcher:
    """Whether an item (by id) or a text (by its word n-grams) is covered by any of the live tombstones."""

    secret: bytes
    tombstones: Sequence[ForgetTombstone]
    strengths: frozenset[str] = frozenset(STRENGTHS)
    _ids: frozenset[str] = field(init=False)
    _digests: frozenset[str] = field(init=False)
    _lengths: tuple[int, ...] = field(init=False)
    _states: frozenset[str] = field(init=False)
    _texts: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        chosen = [t for t in self.tombstones if t.strength in self.strengths]
        self._ids = frozenset(i for t in chosen for i in t.memory_ids)
        self._digests = frozenset(d for t in chosen for d in t.span_digests)
        self._lengths = tuple(sorted({n for t in chosen for n in t.span_lengths}))
        self._states = frozenset(d for t in chosen for d in t.state_key_digests)
        self._texts = frozenset(d for t in chosen for d in t.text_digests)

    def __bool__(self) -> bool:
        return bool(self._ids or self._digests or self._states or self._texts)

    def covers_id(self, item_id: str) -> bool:
        return item_id in self._ids

    def covers_text(self, text: str) -> bool:
        if not (self._digests or self._texts):
            return False
        words = tokens(text)
        if self._texts and words and text_digest(self.secret, words) in self._texts:
            return True
        for n in self._lengths:
            for start in range(0, len(words) - n + 1):
                if span_digest(self.secret, words[start : start + n]) in self._digests:
                    return True
        return False

    def covers(self, item_id: str | None, text: str) -> bool:
        return (item_id is not None and self.covers_id(item_id)) or self.covers_text(text)

    def covers_state_key(self, state_key: str) -> bool:
        return state_key_digest(self.secret, state_key) in self._states


_COLUMNS = (
    "id, subject_key, app_name, strength, memory_ids, span_digests, span_lengths, state_key_digests, created_at, "
    "lifted_at, text_digests"
)


def _tombstone(row: tuple[Any, ...]) -> ForgetTombstone:
    return ForgetTombstone(
        id=str(row[0]),
        subject_key=str(row[1]),
        app_name=str(row[2]),
        strength=str(row[3]),
        memory_ids=frozenset(str(i) for i in row[4]),
        span_digests=frozenset(row[5]),
        span_lengths=frozenset(row[6]),
        state_key_digests=frozenset(row[7]),
        created_at=row[8],
        lifted_at=row[9],
        text_digests=frozenset(row[10] or ()),
    )


class ForgetLedger:
    """The ``forget_tombstones`` table: place, lift (suppressions only) and read a subject's live ones."""

    def __init__(self, pool: ConnectionPool, secret: bytes) -> None:
        self._pool = pool
        self._secret = secret

    def place(
        self,
        subject_key: str,
        app_name: str,
        strength: str,
        *,
        memory_ids: Iterable[str] = (),
        spans: Iterable[str] = (),
        state_keys: Iterable[str] = (),
        request_id: str | None = None,
        tombstone_id: str | None = None,
        texts: Iterable[str] = (),
    ) -> str:
        """Write one tombstone (idempotent by ``tombstone_id``: a retry writes nothing more). ``texts``: whole
        texts refused again (an erased session's own memories), kept as keyed hashes of their words."""
        if strength not in STRENGTHS:
            raise ForgetRefused(f"unknown strength {strength!r}: one of {', '.join(STRENGTHS)}")
        ids = sorted({str(uuid.UUID(i)) for i in memory_ids})
        normalised = [w for w in (span_words(s) for s in spans) if w]
        if any(len(w) > MAX_SPAN_WORDS for w in normalised):
            raise ForgetRefused(f"a span is longer than {MAX_SPAN_WORDS} words: name the item instead")
        keys = sorted({state_key_digest(self._secret, k) for k in state_keys})
        wholes = sorted({text_digest(self._secret, w) for w in (span_words(t) for t in texts) if w})
        if not (ids or normalised or keys or wholes):
            raise ForgetRefused("a forget must name items, spans or state keys")
        digests = sorted({span_digest(self._secret, w) for w in normalised})
        lengths = sorted({len(w) for w in normalised})
        new_id = tombstone_id or str(uuid.uuid4())
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO forget_tombstones (id, subject_key, app_name, strength, memory_ids, span_digests, "
                "span_lengths, state_key_digests, request_id, text_digests) "
                "VALUES (%s, %s, %s, %s, %s::uuid[], %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (new_id, subject_key, app_name, strength, ids, digests, lengths, keys, request_id, wholes),
            )
        return new_id

    def restore(self, t: ForgetTombstone) -> bool:
        """Re-create a tombstone from its journalled form (a restored backup predates it); whether it was missing."""
        with self._pool.connection() as conn:
            return (
                conn.execute(
                    "INSERT INTO forget_tombstones (id, subject_key, app_name, strength, memory_ids, span_digests, "
                    "span_lengths, state_key_digests, created_at, text_digests) "
                    "VALUES (%s, %s, %s, %s, %s::uuid[], %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (
                        t.id,
                        t.subject_key,
                        t.app_name,
                        t.strength,
                        sorted(t.memory_ids),
                        sorted(t.span_digests),
                        sorted(t.span_lengths),
                        sorted(t.state_key_digests),
                        t.created_at,
                        sorted(t.text_digests),
                    ),
                ).rowcount
                > 0
            )

    def lift(self, subject_key: str, tombstone_id: str) -> bool:
        """Unsuppress: only a suppression of this subject is ever lifted; returns whether one was."""
        with self._pool.connection() as conn:
            return (
                conn.execute(
                    "UPDATE forget_tombstones SET lifted_at = now() WHERE id = %s AND subject_key = %s "
                    "AND strength = 'suppress' AND lifted_at IS NULL",
                    (tombstone_id, subject_key),
                ).rowcount
                > 0
            )

    def live(self, subject_key: str) -> list[ForgetTombstone]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM forget_tombstones WHERE subject_key = %s AND lifted_at IS NULL "
                "ORDER BY created_at",
                (subject_key,),
            ).fetchall()
        return [_tombstone(r) for r in rows]

    def get(self, tombstone_id: str) -> ForgetTombstone | None:
        with self._pool.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM forget_tombstones WHERE id = %s", (tombstone_id,)).fetchone()
        return _tombstone(row) if row else None

    def matcher(self, subject_key: str, strengths: Iterable[str] = STRENGTHS) -> TombstoneMatcher:
        return TombstoneMatcher(self._secret, self.live(subject_key), frozenset(strengths))


REDACTED = "[forgotten at user request]"


def span_patterns(secret: bytes, spans: Iterable[str]) -> dict[str, list[Any]]:
    """What a conversation's redaction needs of forgotten spans: their keyed hashes and word counts (no
    text), the form kept in session state for the rest of the session."""
    normalised = [w for w in (span_words(s) for s in spans) if w and len(w) <= MAX_SPAN_WORDS]
    return {
        "digests": sorted({span_digest(secret, w) for w in normalised}),
        "lengths": sorted({len(w) for w in normalised}),
    }


def redact(secret: bytes, text: str, patterns: dict[str, list[Any]]) -> str:
    """``text`` with every run of words whose normalised form hashes to a forgotten span replaced by
    ``REDACTED`` (exact words, case and punctuation aside; never a substring of a word)."""
    digests = set(patterns.get("digests") or [])
    if not digests or not text:
        return text
    words = [(m.start(), m.end(), m.group(0).lower()) for m in WORD.finditer(text)]
    cut: list[tuple[int, int]] = []
    for n in sorted({int(n) for n in patterns.get("lengths") or []}, reverse=True):
        for i in range(0, len(words) - n + 1):
            start, end = words[i][0], words[i + n - 1][1]
            if any(s < end and start < e for s, e in cut):
                continue
            if span_digest(secret, [w for _s, _e, w in words[i : i + n]]) in digests:
                cut.append((start, end))
    for start, end in sorted(cut, reverse=True):
        text = text[:start] + REDACTED + text[end:]
    return text

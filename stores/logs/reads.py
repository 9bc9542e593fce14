"""The verifier's own read path for the log archive, written apart from the eraser (``stores.logs.archive``).

A line is the subject's when its ``app`` is the subject's app and either its clear ``subject`` field is
the subject key (a sealed line, ``stores.logs.sealing``), its ``user_id`` hashes to the subject key (a plain
line shipped before sealing) or the subject key is among its recorded ``mentions``; free text is never read
and nothing is opened, so a line under a shredded key is judged like any other. The reads are
indexed: the subject's index rows, the segments the logs step recorded, and a sample of the most recent
segments (catching lines a shipper failed to index). Malformed lines (not UTF-8, not a JSON object, a
``user_id`` no identity could have, a ``subject`` that is not a subject key, ``mentions`` not a list of
strings) are counted, never a failure and never a reason to raise.

In a legacy segment (shipped before mention keys: ``log_segments.mention_keys`` false) a mention-only line
carries no structure; the check counts, apart, the structureless lines of the app that carry the subject's
identity as one whole word of their text (the word's subject key is the subject key: exact, never a
substring). The eraser removes such lines when the index confirms them and keeps the index row otherwise,
so any left is a failure (at worst a false alarm on a legacy segment, never a pass over a left line).

Lines kept under their writers' legal holds are reported, and the check says from the clear fields alone how
many of them their writers can still read after the shred: a line not sealed, or whose clear ``released``
names the subject (the eraser lifted the subject's layer), opens without the subject's key; any other is
still sealed under it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.infra.errors import InvalidIdentifier
from stores.ledgers.owner_holds import held_of
from stores.privacy.identity import subject_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_SUBJECT_KEY = re.compile(r"sk_[0-9a-f]{40}")  # the verifier's own copy of the subject key's shape
_AROUND = "\"'()[]{}<>,.;:!?"  # punctuation around a word that is not part of the identity it names
_STRUCTURE = ("subject", "mentions", "sealed")  # a line with any of these was shipped with mention keys


@dataclass(frozen=True)
class SegmentScan:
    subject_lines: int = 0
    malformed_lines: int = 0
    legacy_mention_lines: int = 0  # structureless lines naming the subject as a whole word (legacy segments)
    #: the writers of the lines naming the subject (their subject keys, ``""`` for no writer): a line whose
    #: writer is under a legal hold was kept by the eraser on purpose (``stores.ledgers.owner_holds``)
    writers: dict[str, int] = field(default_factory=dict)
    #: of those lines, per writer, the ones not sealed under the subject's key (plain, or its layer released)
    open_without: dict[str, int] = field(default_factory=dict)

    def held_lines(self, held: set[str]) -> int:
        return sum(n for writer, n in self.writers.items() if writer in held)

    def held_readable(self, held: set[str], subject: str) -> tuple[int, int]:
        """(held lines of other writers that open without the subject's key, those still sealed under it)."""
        others = [w for w in self.writers if w in held and w != subject]
        readable = sum(self.open_without.get(w, 0) for w in others)
        return readable, sum(self.writers[w] for w in others) - readable


class SubjectLineRule:
    """The structural rule, once per check (hashes of ``user_id`` values cached)."""

    def __init__(self, secret: bytes, app_name: str, subject: str) -> None:
        self.secret, self.app_name, self.subject = secret, app_name, subject
        self._hashes: dict[str, str | None] = {}

    def _hash(self, user_id: str) -> str | None:
        if user_id not in self._hashes:
            try:
                self._hashes[user_id] = subject_key(self.secret, self.app_name, user_id)
            except (InvalidIdentifier, UnicodeError, ValueError, TypeError):
                self._hashes[user_id] = None
        return self._hashes[user_id]

    def scan(self, body: bytes, legacy: bool = False) -> SegmentScan:
        """Lines naming the subject by structure, malformed lines and, in a legacy segment, structureless
        lines naming the subject as a whole word of their text."""
        found = malformed = mentions = 0
        writers: dict[str, int] = {}
        open_without: dict[str, int] = {}
        for raw in body.split(b"\n"):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                malformed += 1
                continue
            if not isinstance(value, dict):
                malformed += 1
                continue
            mine, odd = self._judge(value)
            found += mine
            if mine:
                writer = self._writer(value)
                writers[writer] = writers.get(writer, 0) + 1
                if self._opens_without_subject(value):
                    open_without[writer] = open_without.get(writer, 0) + 1
            malformed += odd and not mine
            mentions += legacy and not mine and self._names_in_text(value)
        return SegmentScan(found, malformed, mentions, writers, open_without)

    def _opens_without_subject(self, line: dict[str, object]) -> bool:
        """Not sealed, or sealed with the subject's layer released (its clear ``released`` names it)."""
        released = line.get("released")
        return "sealed" not in line or (isinstance(released, list) and self.subject in released)

    def _writer(self, line: dict[str, object]) -> str:
        """The subject key of the line's writer: its clear ``subject``, or its ``user_id`` hashed; ``""``."""
        owner, app, user = line.get("subject"), line.get("app"), line.get("user_id")
        if isinstance(owner, str) and _SUBJECT_KEY.fullmatch(owner):
            return owner
        if app == self.app_name and isinstance(user, str):
            return self._hash(user) or ""
        return ""

    def _names_in_text(self, line: dict[str, object]) -> bool:
        if line.get("app") != self.app_name or any(field in line for field in _STRUCTURE):
            return False
        msg = line.get("msg")
        if not isinstance(msg, str):
            return False
        words = {token for word in msg.split() for token in (word, word.strip(_AROUND)) if token}
        return any(self._hash(token) == self.subject for token in words)

    def _judge(self, line: dict[str, object]) -> tuple[bool, bool]:
        """(names the subject, malformed)."""
        app, user, mentions, owner = line.get("app"), line.get("user_id"), line.get("mentions"), line.get("subject")
        odd = not isinstance(app, str) or (user is not None and not isinstance(user, str))
        if owner is not None and not (isinstance(owner, str) and _SUBJECT_KEY.fullmatch(owner)):
            odd, owner = True, None
        keys: list[str] = []
        if isinstance(mentions, list):
            keys = [m for m in mentions if isinstance(m, str)]
            odd = odd or len(keys) != len(mentions)
        elif mentions is not None:
            odd = True
        if app != self.app_name:
            return False, odd
        if self.subject in keys or owner == self.subject:
            return True, odd
        if isinstance(user, str):
            hashed = self._hash(user)
            return hashed == self.subject, odd or hashed is None
        return False, odd


class LogReads:
    """Index and segment reads of the log archive, straight from Postgres and S3."""

    def __init__(
        self,
        pool: ConnectionPool,
        s3: S3Client,
        bucket: str,
        segment_lock: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self._pool = pool
        self._s3 = s3
        self._bucket = bucket
        self._lock = segment_lock

    def index_entries(self, subject: str, window_before: datetime | None, besides: Sequence[str] = ()) -> int:
        """The subject's index rows (windows before ``window_before``), those of the segments ``besides`` left
        out (segments whose only lines naming the subject are kept under their writers' holds)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM log_subject_index i JOIN log_segments s ON s.segment_key = i.segment_key "
                "WHERE i.subject_key = %s AND (%s::timestamptz IS NULL OR s.window_start < %s) "
                "AND NOT i.segment_key = ANY(%s)",
                (subject, window_before, window_before, list(besides)),
            ).fetchone()
        return int(row[0]) if row else 0

    def held_writers(self, writers: Iterable[str]) -> set[str]:
        """Those of ``writers`` (subject keys) under a legal hold now."""
        with self._pool.connection() as conn:
            return held_of(conn, [w for w in writers if w])

    def recent_segments(self, limit: int, window_before: datetime | None, line_budget: int) -> list[str]:
        """The ``limit`` newest segments (windows before ``window_before``), newest first, as long as the lines
        of those before each stay under ``line_budget`` (the newest is always taken): the sample's cost is
        bounded by lines read, not by how busy the platform's recent windows were."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT segment_key FROM (SELECT segment_key, window_start, "
                "sum(line_count) OVER (ORDER BY window_start DESC, segment_key ROWS UNBOUNDED PRECEDING) "
                "- line_count AS lines_before FROM (SELECT segment_key, window_start, line_count FROM log_segments "
                "WHERE (%(before)s::timestamptz IS NULL OR window_start < %(before)s) "
                "ORDER BY window_start DESC, segment_key LIMIT %(limit)s) newest) counted "
                "WHERE lines_before < %(budget)s ORDER BY window_start DESC, segment_key",
                {"before": window_before, "limit": limit, "budget": max(line_budget, 1)},
            ).fetchall()
        return [r[0] for r in rows]

    def legacy_segments(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` shipped before mention keys were recorded (their rows do not say they carry them)."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT segment_key FROM log_segments WHERE segment_key = ANY(%s) AND NOT mention_keys", (keys,)
            ).fetchall()
        return {r[0] for r in rows}

    def body(self, key: str) -> bytes | None:
        try:
            return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None

    def old_versions(self, key: str) -> int:
        """Non-current versions and delete markers of one segment.

        Listed first without the segment lock: none is a true answer at that instant (the erasure's own purge
        ended before its check, and nothing makes an old version again but a new put). A segment that shows
        some is listed again under the archive's segment lock, so another user's purge caught between its
        put of a new version and its drop of the older ones has finished (the old count then is real). The
        lock, two statements and perhaps a wait in an activity slot, is taken only where something was seen."""
        if not self._count_old(key):
            return 0
        with self._lock(key):
            return self._count_old(key)

    def _count_old(self, key: str) -> int:
        found = 0
        for page in self._s3.get_paginator("list_object_versions").paginate(Bucket=self._bucket, Prefix=key):
            found += sum(1 for v in page.get("Versions", []) if v["Key"] == key and not v.get("IsLatest"))
            found += sum(1 for m in page.get("DeleteMarkers", []) if m["Key"] == key)
        return found

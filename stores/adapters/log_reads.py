"""The verifier's own read path for the log archive, written apart from the eraser (``stores.logs``).

A line is the subject's when its ``app`` is the subject's app and either its clear ``subject`` field is
the subject key (a sealed line, ``stores.log_sealing``), its ``user_id`` hashes to the subject key (a plain
line shipped before sealing) or the subject key is among its recorded ``mentions``; free text is never read
and nothing is opened, so a line under a shredded key is judged like any other. The reads are
indexed: the subject's index rows, the segments the logs step recorded, and a sample of the most recent
segments (catching lines a shipper failed to index). Malformed lines (not UTF-8, not a JSON object, a
``user_id`` no identity could have, a ``subject`` that is not a subject key, ``mentions`` not a list of
strings) are counted, never a failure and never a reason to raise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.errors import InvalidIdentifier
from stores.identity import subject_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_SUBJECT_KEY = re.compile(r"sk_[0-9a-f]{40}")  # the verifier's own copy of the subject key's shape


@dataclass(frozen=True)
class SegmentScan:
    subject_lines: int = 0
    malformed_lines: int = 0


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

    def scan(self, body: bytes) -> SegmentScan:
        found = malformed = 0
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
            malformed += odd and not mine
        return SegmentScan(found, malformed)

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

    def index_entries(self, subject: str, window_before: datetime | None) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM log_subject_index i JOIN log_segments s ON s.segment_key = i.segment_key "
                "WHERE i.subject_key = %s AND (%s::timestamptz IS NULL OR s.window_start < %s)",
                (subject, window_before, window_before),
            ).fetchone()
        return int(row[0]) if row else 0

    def recent_segments(self, limit: int, window_before: datetime | None) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT segment_key FROM log_segments WHERE (%s::timestamptz IS NULL OR window_start < %s) "
                "ORDER BY window_start DESC, segment_key LIMIT %s",
                (window_before, window_before, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def body(self, key: str) -> bytes | None:
        try:
            return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None

    def old_versions(self, key: str) -> int:
        """Non-current versions and delete markers of one segment, read under the archive's segment lock
        (another user's purge puts a new version before it drops the older ones)."""
        with self._lock(key):
            found = 0
            for page in self._s3.get_paginator("list_object_versions").paginate(Bucket=self._bucket, Prefix=key):
                found += sum(1 for v in page.get("Versions", []) if v["Key"] == key and not v.get("IsLatest"))
                found += sum(1 for m in page.get("DeleteMarkers", []) if m["Key"] == key)
        return found

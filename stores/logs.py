"""The platform's log archive: JSON lines in S3 segments, indexed by subject key at ship time.

A segment is one object per (time window, shard). When it ships, ``log_subject_index`` records which
subjects have lines in it, so a purge rewrites only the segments the index names. A purge removes every
line of the user (by its ``user_id`` field, and any line whose free text names the raw identifier as a
whole token), replaces the object, removes every older version of it, then drops the index row. Each
segment is one resumable unit: a retry after a crash at any point finishes the job and changes nothing more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg_pool import ConnectionPool

from stores.identity import subject_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class LogLine:
    ts: str
    app: str
    user_id: str | None
    level: str
    msg: str
    #: Users the line mentions in its free text (known to the logging code); indexed, not written.
    mentioned: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {"ts": self.ts, "level": self.level, "app": self.app, "user_id": self.user_id, "msg": self.msg},
            ensure_ascii=False,
            separators=(",", ":"),
        )


def segment_key(window_start: datetime, shard: int) -> str:
    return f"logs/{window_start:%Y/%m/%d/%H%M}-shard{shard:02d}.jsonl"


#: Free-text matching only for identifiers at least this long and holding something other than
#: letters and spaces (an e-mail address, a handle with a digit or a dot): a short id, or one made of plain
#: words ("refund", "inhaler refill"), would match ordinary text in other users' lines and purge them.
#: Lines carrying the id in their ``user_id`` field always match.
MIN_MENTION_LENGTH = 5


def can_be_mentioned(raw_id: str) -> bool:
    return len(raw_id) >= MIN_MENTION_LENGTH and any(not (c.isalpha() or c.isspace()) for c in raw_id)


def mentions(text: str, raw_id: str) -> bool:
    """Whether ``raw_id`` appears in ``text`` as a whole token (``bob`` is not in ``bobby``)."""
    if not can_be_mentioned(raw_id):
        return False
    return re.search(rf"(?<![\w@.+-]){re.escape(raw_id)}(?![\w@+-]|\.\w)", text) is not None


def line_of_user(record: dict[str, Any], app_name: str, user_id: str) -> bool:
    if record.get("app") == app_name and record.get("user_id") == user_id:
        return True
    return mentions(str(record.get("msg", "")), user_id)


class LogArchive:
    def __init__(self, s3: S3Client, bucket: str, pool: ConnectionPool, subject_secret: bytes) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._pool = pool
        self._secret = subject_secret

    # ----- shipping -------------------------------------------------------------------------------

    def ship(self, lines: Sequence[LogLine], window_start: datetime, shard: int) -> str:
        key = segment_key(window_start, shard)
        body = "".join(line.to_json() + "\n" for line in lines).encode("utf-8")
        with self._segment_lock(key):
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        per_subject: dict[str, int] = {}
        for line in lines:
            for user in {u for u in (line.user_id, *line.mentioned) if u}:
                sk = subject_key(self._secret, line.app, user)
                per_subject[sk] = per_subject.get(sk, 0) + 1
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO log_segments (segment_key, window_start, shard, line_count) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (segment_key) DO UPDATE SET line_count = EXCLUDED.line_count",
                (key, window_start, shard, len(lines)),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO log_subject_index (subject_key, segment_key, line_count) VALUES (%s, %s, %s) "
                    "ON CONFLICT (subject_key, segment_key) DO UPDATE SET line_count = EXCLUDED.line_count",
                    [(sk, key, n) for sk, n in per_subject.items()],
                )
        return key

    # ----- reading --------------------------------------------------------------------------------

    def segments_of(self, subject: str, window_before: datetime | None = None) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT i.segment_key FROM log_subject_index i JOIN log_segments s USING (segment_key) "
                "WHERE i.subject_key = %s AND (%s::timestamptz IS NULL OR s.window_start < %s) "
                "ORDER BY i.segment_key",
                (subject, window_before, window_before),
            ).fetchall()
        return [r[0] for r in rows]

    def read(self, key: str) -> list[dict[str, Any]]:
        body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read().decode("utf-8")
        return [json.loads(line) for line in body.splitlines() if line.strip()]

    def read_if_exists(self, key: str) -> list[dict[str, Any]] | None:
        try:
            return self.read(key)
        except self._s3.exceptions.NoSuchKey:
            return None

    def recent_segments(self, limit: int) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT segment_key FROM log_segments ORDER BY window_start DESC, segment_key LIMIT %s",
                (limit,),
            ).fetchall()
        return [r[0] for r in rows]

    def count_user_lines(self, keys: Iterable[str], app_name: str, user_id: str, readers: int = 1) -> int:
        def count(key: str) -> int:
            return sum(1 for r in self.read_if_exists(key) or [] if line_of_user(r, app_name, user_id))

        with ThreadPoolExecutor(max(1, readers), thread_name_prefix="log-readers") as pool:
            return sum(pool.map(count, keys))

    def old_versions(self, key: str) -> int:
        """Non-current versions and delete markers of one segment object.

        Read under the segment lock: another user's purge puts a new version before it drops the older
        ones, and a check between the two would count a version that is about to go."""
        with self._segment_lock(key):
            return self._old_versions(key)

    def _old_versions(self, key: str) -> int:
        listing = self._s3.list_object_versions(Bucket=self._bucket, Prefix=key)
        versions = [v for v in listing.get("Versions", []) if v["Key"] == key and not v.get("IsLatest")]
        markers = [m for m in listing.get("DeleteMarkers", []) if m["Key"] == key]
        return len(versions) + len(markers)

    # ----- purge ----------------------------------------------------------------------------------

    def purge_segment(self, key: str, app_name: str, user_id: str, subject: str) -> int:
        """Remove the user's lines from one segment; returns lines removed (0 on a repeat)."""
        return self.purge_matching(key, subject, lambda r: line_of_user(r, app_name, user_id))

    @contextmanager
    def _segment_lock(self, key: str) -> Iterator[None]:
        """Serialise read-modify-write of one segment across processes: two erasures purging the same
        segment at once would otherwise each write back the other's lines (a lost update)."""
        with self._pool.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7))", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 7))", (key,))

    def purge_matching(self, key: str, subject: str, doomed: Callable[[dict[str, Any]], bool]) -> int:
        """Remove the lines ``doomed`` selects, replace the object, drop old versions and the index row."""
        with self._segment_lock(key):
            return self._purge_locked(key, subject, doomed)

    def _purge_locked(self, key: str, subject: str, doomed: Callable[[dict[str, Any]], bool]) -> int:
        records = self.read_if_exists(key)
        if records is None:
            records = []
        kept = [r for r in records if not doomed(r)]
        removed = len(records) - len(kept)
        current_version: str | None = None
        if removed:
            body = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in kept)
            put = self._s3.put_object(
                Bucket=self._bucket, Key=key, Body=body.encode("utf-8"), ContentType="application/x-ndjson"
            )
            current_version = put.get("VersionId")
        self._drop_old_versions(key, current_version)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM log_subject_index WHERE subject_key = %s AND segment_key = %s", (subject, key))
            if removed:
                conn.execute("UPDATE log_segments SET line_count = %s WHERE segment_key = %s", (len(kept), key))
        return removed

    def _drop_old_versions(self, key: str, keep_version: str | None) -> None:
        listing = self._s3.list_object_versions(Bucket=self._bucket, Prefix=key)
        doomed: list[dict[str, str]] = []
        for v in listing.get("Versions", []):
            if v["Key"] != key or not v.get("VersionId") or v["VersionId"] == "null":
                continue
            if v["VersionId"] == keep_version or (keep_version is None and v.get("IsLatest")):
                continue
            doomed.append({"Key": key, "VersionId": v["VersionId"]})
        doomed += [
            {"Key": key, "VersionId": m["VersionId"]}
            for m in listing.get("DeleteMarkers", [])
            if m["Key"] == key and m.get("VersionId")
        ]
        for start in range(0, len(doomed), 1000):
            self._s3.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": doomed[start : start + 1000], "Quiet": True},  # type: ignore[typeddict-item]
            )

    def purge_user(
        self,
        app_name: str,
        user_id: str,
        subject: str,
        skip: int = 0,
        on_segment: Callable[[int, int], None] | None = None,
    ) -> tuple[int, int]:
        """Purge every indexed segment, resuming after ``skip`` done; returns (segments, lines)."""
        keys = self.segments_of(subject)
        lines = 0
        for n, key in enumerate(keys):
            lines += self.purge_segment(key, app_name, user_id, subject)
            if on_segment:
                on_segment(skip + n + 1, lines)
        return len(keys), lines

"""The verifier's own read paths: each check's queries, written apart from the erasers' code.

A check that reused the eraser's matching code would share its bugs and pass whatever the eraser
missed. These reads share only the stores' *formats* with the writers (the artifact key layout, the
session-ref form, the envelope header, the subject-key hash) and nothing of the erase adapters
(``stores.memory._NAMING``, ``MemoryEraser``, ``ArtifactEraser``, ``SessionStore``, ``DataKeyStore``).

Every read is an indexed lookup by subject key, (app, user), (app, session id), memory id, key id or an
S3 prefix of the one subject; nothing scans a whole table or bucket. ``before`` bounds a read to data
dated before the erasure (post-completion re-verification: a returning user's new data is not a leftover).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from psycopg_pool import ConnectionPool

from stores.artifacts import user_prefix
from stores.crypto import DataKey, key_id_of, open_sealed
from stores.errors import CiphertextInvalid
from stores.identity import session_digest, session_ref
from stores.tombstones import open_session_id

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client

CHUNK = 500  # ids per statement: every id is its own index probe
GONE_STATES = frozenset({"PendingDeletion", "PendingReplicaDeletion"})


@dataclass(frozen=True)
class Bound:
    """The erasure time of a completed request: only data dated before it can be a leftover."""

    erased_at: datetime
    keys_shredded_at: datetime | None = None

    @property
    def s3_cutoff(self) -> datetime:
        """S3's ``LastModified`` has one-second resolution: only objects clearly older than the erasure."""
        return self.erased_at.replace(microsecond=0) - timedelta(seconds=1)

    @property
    def keys_cutoff(self) -> datetime:
        return self.keys_shredded_at or self.erased_at


def _chunks(items: Sequence[Any]) -> list[list[Any]]:
    return [list(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]


class VerifierReads:
    def __init__(self, pool: ConnectionPool, s3: S3Client, kms: KMSClient, artifact_bucket: str, secret: bytes) -> None:
        self._secret = secret
        self._pool = pool
        self._s3 = s3
        self._kms = kms
        self._bucket = artifact_bucket

    # ----- sessions (google-adk's tables) ---------------------------------------------------------

    def user_session_rows(self, app_name: str, user_id: str) -> dict[str, int]:
        """Sessions, events and the user_states row filed under (app, user): ADK's primary-key prefixes."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM sessions WHERE app_name = %(a)s AND user_id = %(u)s),"
                " (SELECT count(*) FROM events WHERE app_name = %(a)s AND user_id = %(u)s),"
                " (SELECT count(*) FROM user_states WHERE app_name = %(a)s AND user_id = %(u)s)",
                {"a": app_name, "u": user_id},
            ).fetchone()
        assert row is not None
        return {"sessions": int(row[0]), "events": int(row[1]), "user_states": int(row[2])}

    def rows_under_session_ids(
        self, app_name: str, session_ids: Sequence[str], is_subject: Callable[[str], bool], before: datetime | None
    ) -> int:
        """Sessions and events under these (erased) session ids whose user is the subject, by (app, id)."""
        found = 0
        with self._pool.connection() as conn:
            for chunk in _chunks(list(session_ids)):
                rows = conn.execute(
                    "SELECT user_id, count(*) FROM sessions WHERE app_name = %(a)s AND id = ANY(%(ids)s) "
                    "AND (%(b)s::timestamptz IS NULL OR create_time < %(b)s) GROUP BY user_id "
                    "UNION ALL SELECT user_id, count(*) FROM events WHERE app_name = %(a)s "
                    "AND session_id = ANY(%(ids)s) AND (%(b)s::timestamptz IS NULL OR timestamp < %(b)s) "
                    "GROUP BY user_id",
                    {"a": app_name, "ids": chunk, "b": before},
                ).fetchall()
                found += sum(int(n) for user, n in rows if isinstance(user, str) and is_subject(user))
        return found

    def tombstoned_sessions(self, subject: str) -> set[str]:
        """The keyed digests of the subject's session tombstones."""
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT session_digest FROM session_tombstones WHERE subject_key = %s", (subject,))
            return {r[0] for r in rows.fetchall()}

    def erased_session_ids(self, subject: str, digests: Sequence[str]) -> list[str]:
        """The session ids behind these digests, opened from the subject's tombstones (an id whose opened
        value does not hash back to its digest is not trusted)."""
        wanted = set(digests)
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT session_digest, session_sealed FROM session_tombstones WHERE subject_key = %s", (subject,)
            ).fetchall()
        ids = []
        for digest, sealed in rows:
            if digest in wanted and sealed is not None:
                sid = open_session_id(self._secret, subject, bytes(sealed))
                if session_digest(self._secret, subject, sid) == digest:
                    ids.append(sid)
        return sorted(ids)

    # ----- artifacts ------------------------------------------------------------------------------

    def artifact_entries(self, app_name: str, subject: str, before: datetime | None) -> dict[str, int]:
        """Object versions and delete markers under the subject's prefix (the writers' key layout)."""
        versions = markers = 0
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": user_prefix(app_name, subject)}
        while True:
            page: Any = self._s3.list_object_versions(**kwargs)
            versions += sum(1 for v in page.get("Versions", []) if before is None or v["LastModified"] < before)
            markers += sum(1 for m in page.get("DeleteMarkers", []) if before is None or m["LastModified"] < before)
            if not page.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")
        return {"object_versions": versions, "delete_markers": markers}

    # ----- memory ---------------------------------------------------------------------------------

    def erased_memory_ids(self, subject: str) -> list[uuid.UUID]:
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT memory_id FROM erased_memories WHERE subject_key = %s", (subject,))
            return [r[0] for r in rows.fetchall()]

    def own_memory_rows(self, subject: str, before: datetime | None) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories WHERE subject_key = %(s)s "
                "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                {"s": subject, "b": before},
            ).fetchone()
        return int(row[0]) if row else 0

    def rows_naming(self, subject: str, erased_ids: Sequence[uuid.UUID], session_ids: Sequence[str]) -> int:
        """Rows anywhere (any user) that are an erased row again, or whose provenance names an erased row
        or an erased session of the subject: one GIN probe per named id, one primary-key probe per id."""
        hits: set[uuid.UUID] = set()
        refs = [session_ref(subject, s) for s in session_ids]
        with self._pool.connection() as conn:
            for chunk in _chunks(list(erased_ids)):
                for (row_id,) in conn.execute(
                    "SELECT id FROM memories WHERE id = ANY(%(ids)s) UNION "
                    "SELECT hit.id FROM unnest(%(ids)s::uuid[]) AS named(id) CROSS JOIN LATERAL "
                    "(SELECT id FROM memories WHERE derived_from @> ARRAY[named.id]) AS hit",
                    {"ids": chunk},
                ).fetchall():
                    hits.add(row_id)
            for chunk in _chunks(refs):
                for (row_id,) in conn.execute(
                    "SELECT hit.id FROM unnest(%s::text[]) AS named(ref) CROSS JOIN LATERAL "
                    "(SELECT id FROM memories WHERE source_sessions @> ARRAY[named.ref]) AS hit",
                    (chunk,),
                ).fetchall():
                    hits.add(row_id)
        return len(hits)

    def rows_with_digests(self, digests: Sequence[str], before: datetime | None) -> int:
        if not digests:
            return 0
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories WHERE token_digests && %(d)s::text[] "
                "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                {"d": list(digests), "b": before},
            ).fetchone()
        return int(row[0]) if row else 0

    # ----- keys -----------------------------------------------------------------------------------

    def wrapped_keys(self, subject: str, before: datetime | None) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM data_keys WHERE subject_key = %(s)s "
                "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                {"s": subject, "b": before},
            ).fetchone()
        return int(row[0]) if row else 0

    def kms_keys_still_usable(self, subject: str, before: datetime | None) -> int:
        """Per-user KMS keys of the subject (registered at creation) that KMS does not report as pending
        deletion or gone."""
        with self._pool.connection() as conn:
            keys = [
                r[0]
                for r in conn.execute(
                    "SELECT kms_key_id FROM subject_kms_keys WHERE subject_key = %(s)s "
                    "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                    {"s": subject, "b": before},
                ).fetchall()
            ]
        usable = 0
        for key in keys:
            try:
                state = self._kms.describe_key(KeyId=key)["KeyMetadata"].get("KeyState")
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") == "NotFoundException":
                    continue
                raise
            if state not in GONE_STATES:
                usable += 1
        return usable

    def sample_decrypts(self, memory_id: str, blob: bytes) -> bool:
        """Whether the sampled ciphertext still opens: its wrapped key row (by the key id in the envelope
        header) unwrapped by KMS, then the envelope opened. No cache: the key is read afresh."""
        try:
            key_id = key_id_of(blob)
        except CiphertextInvalid:
            return False
        with self._pool.connection() as conn:
            row = conn.execute("SELECT wrapped_key, kms_key_id FROM data_keys WHERE key_id = %s", (key_id,)).fetchone()
        if row is None:
            return False
        try:
            plain = self._kms.decrypt(CiphertextBlob=bytes(row[0]), KeyId=row[1])["Plaintext"]
            open_sealed(DataKey(key_id, plain), blob, uuid.UUID(memory_id).bytes)
        except (ClientError, CiphertextInvalid):
            return False
        return True

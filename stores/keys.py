"""Per-user data keys by envelope encryption under KMS, and crypto-shredding.

A subject's data key is generated with KMS ``GenerateDataKey`` under the configured wrapping key and
stored wrapped in ``data_keys``; it is unwrapped with ``Decrypt`` on use and cached in process for a short
time. Shredding deletes every wrapped version: from then on every ciphertext of that subject, in live
stores or in any backup, fails with ``DataKeyShredded`` (a process that already unwrapped the key forgets
it within ``cache_ttl`` seconds). Default mode makes no KMS call to shred.

Per-user KMS key mode (``per_user_kms_keys=True``) wraps each subject's data key under its own KMS key and
also schedules that KMS key's deletion (minimum window) on shred, for KMS-side destruction. Creating those
keys is the agent runtime's job (its IAM policy: ``deploy/iam/runtime-policy-per-user-keys.json``); the
erasure worker only uses, describes and schedules the deletion of keys carrying the managed tag.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg_pool import ConnectionPool

from stores.crypto import DataKey, key_id_of, open_sealed, open_with, seal
from stores.errors import DataKeyShredded

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient


class DataKeyStore:
    def __init__(
        self,
        pool: ConnectionPool,
        kms: KMSClient,
        kms_key_id: str,
        *,
        cache_ttl: float = 30.0,
        per_user_kms_keys: bool = False,
    ) -> None:
        self._pool = pool
        self._kms = kms
        self._kms_key_id = kms_key_id
        self._ttl = cache_ttl
        self._per_user = per_user_kms_keys
        self._lock = threading.Lock()
        self._by_id: dict[uuid.UUID, tuple[float, DataKey, str]] = {}
        self._current: dict[str, tuple[float, DataKey]] = {}
        self.kms_calls = 0

    # ----- use -----------------------------------------------------------------------------------

    def current(self, subject_key: str) -> DataKey:
        """The subject's newest data key, generated (one KMS call) on first use."""
        now = time.monotonic()
        with self._lock:
            hit = self._current.get(subject_key)
            if hit and hit[0] > now:
                return hit[1]
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT key_id FROM data_keys WHERE subject_key = %s ORDER BY version DESC LIMIT 1",
                (subject_key,),
            ).fetchone()
        try:
            key = self.get(row[0]) if row else self._generate(subject_key)
        except DataKeyShredded:  # shredded between the two reads: a late writer gets a fresh key (swept later)
            key = self._generate(subject_key)
        with self._lock:
            self._current[subject_key] = (now + self._ttl, key)
        return key

    def get(self, key_id: uuid.UUID) -> DataKey:
        now = time.monotonic()
        with self._lock:
            hit = self._by_id.get(key_id)
            if hit and hit[0] > now:
                return hit[1]
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT wrapped_key, kms_key_id, subject_key FROM data_keys WHERE key_id = %s", (key_id,)
            ).fetchone()
        if row is None:
            raise DataKeyShredded("the data key of this ciphertext has been destroyed")
        self.kms_calls += 1
        plain = self._kms.decrypt(CiphertextBlob=bytes(row[0]), KeyId=row[1])["Plaintext"]
        key = DataKey(key_id, plain)
        with self._lock:
            self._by_id[key_id] = (now + self._ttl, key, row[2])
        return key

    def encrypt(self, subject_key: str, plaintext: bytes, context: bytes = b"") -> tuple[uuid.UUID, bytes]:
        key = self.current(subject_key)
        return key.key_id, seal(key, plaintext, context)

    def decrypt(self, blob: bytes, context: bytes = b"") -> bytes:
        return open_sealed(self.get(key_id_of(blob)), blob, context)

    def decrypt_many(self, items: Sequence[tuple[bytes, bytes]]) -> list[bytes | None]:
        """Open many ``(blob, context)`` at once: one key lookup and one cipher object per data key (a memory
        search opens every embedding of the user). A blob whose key is shredded gives ``None``."""
        ciphers: dict[uuid.UUID, AESGCM | None] = {}
        out: list[bytes | None] = []
        for blob, context in items:
            key_id = key_id_of(blob)
            if key_id not in ciphers:
                try:
                    ciphers[key_id] = AESGCM(self.get(key_id).material)
                except DataKeyShredded:
                    ciphers[key_id] = None
            cipher = ciphers[key_id]
            out.append(None if cipher is None else open_with(cipher, blob, context))
        return out

    def _generate(self, subject_key: str) -> DataKey:
        wrap_key = self._create_user_kms_key(subject_key) if self._per_user else self._kms_key_id
        self.kms_calls += 1
        generated = self._kms.generate_data_key(KeyId=wrap_key, KeySpec="AES_256")
        key_id = uuid.uuid4()
        with self._pool.connection() as conn, conn.transaction():
            version = conn.execute(
                "INSERT INTO data_key_versions (subject_key, last_version) VALUES (%s, 1) "
                "ON CONFLICT (subject_key) DO UPDATE SET last_version = data_key_versions.last_version + 1 "
                "RETURNING last_version",
                (subject_key,),
            ).fetchone()
            assert version is not None
            conn.execute(
                "INSERT INTO data_keys (key_id, subject_key, version, wrapped_key, kms_key_id) "
                "VALUES (%s, %s, %s, %s, %s)",
                (key_id, subject_key, version[0], generated["CiphertextBlob"], wrap_key),
            )
            if self._per_user:
                conn.execute(
                    "INSERT INTO subject_kms_keys (subject_key, kms_key_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (subject_key, wrap_key),
                )
        return DataKey(key_id, generated["Plaintext"])

    def _create_user_kms_key(self, subject_key: str) -> str:
        self.kms_calls += 1
        created: Any = self._kms.create_key(
            Description="erasure-orchestrator per-user key",
            Tags=[
                {"TagKey": "erasure:managed-by", "TagValue": "erasure-orchestrator"},
                {"TagKey": "erasure:subject", "TagValue": subject_key},
            ],
        )
        return str(created["KeyMetadata"]["KeyId"])

    # ----- erase and check -----------------------------------------------------------------------

    def shred(self, subject_key: str, created_before: datetime | None = None) -> int:
        """Delete every wrapped key version of the subject (optionally only those created before a time,
        so a returning user's new key survives a later sweep); idempotent. Returns versions destroyed.

        Per-user KMS key mode: the KMS keys' deletion is scheduled *first*, and the rows are deleted (with
        the KMS keys marked in ``subject_kms_keys``, one transaction) only once KMS accepted it or
        reports the key already pending deletion or gone. A failed KMS call leaves the rows in place, so
        a retry finds them and calls KMS again; deleting the rows first would leave nothing to retry from.
        """
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT key_id, kms_key_id FROM data_keys WHERE subject_key = %s "
                "AND (%s::timestamptz IS NULL OR created_at < %s)",
                (subject_key, created_before, created_before),
            ).fetchall()
        kms_keys = sorted({r[1] for r in rows if r[1] != self._kms_key_id}) if self._per_user else []
        for kms_key in kms_keys:
            self._schedule_deletion(kms_key)
        with self._pool.connection() as conn, conn.transaction():
            if kms_keys:
                conn.execute(
                    "INSERT INTO subject_kms_keys (subject_key, kms_key_id, deletion_scheduled_at) "
                    "SELECT %s, k, now() FROM unnest(%s::text[]) AS given(k) ON CONFLICT (subject_key, kms_key_id) "
                    "DO UPDATE SET deletion_scheduled_at = COALESCE(subject_kms_keys.deletion_scheduled_at, now())",
                    (subject_key, kms_keys),
                )
            deleted = conn.execute(
                "DELETE FROM data_keys WHERE key_id = ANY(%s) RETURNING key_id", ([r[0] for r in rows],)
            ).fetchall()
        with self._lock:
            self._current.pop(subject_key, None)
            for (key_id,) in deleted:
                self._by_id.pop(key_id, None)
            for key_id in [k for k, v in self._by_id.items() if v[2] == subject_key]:
                self._by_id.pop(key_id, None)
        return len(deleted)

    def _schedule_deletion(self, kms_key: str) -> None:
        """Schedule a per-user KMS key's deletion (minimum window); done already counts as done."""
        self.kms_calls += 1
        try:
            self._kms.schedule_key_deletion(KeyId=kms_key, PendingWindowInDays=7)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code == "NotFoundException":
                return
            if code == "KMSInvalidStateException":
                state = self._kms.describe_key(KeyId=kms_key)["KeyMetadata"].get("KeyState")
                if state in ("PendingDeletion", "PendingReplicaDeletion"):
                    return
            raise

    def count(self, subject_key: str) -> int:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT count(*) FROM data_keys WHERE subject_key = %s", (subject_key,)).fetchone()
        return int(row[0]) if row else 0

"""Per-user data keys by envelope encryption under KMS, and crypto-shredding.

A subject's data key is generated with KMS ``GenerateDataKey`` under the configured wrapping key and
stored wrapped in ``data_keys``; it is unwrapped with ``Decrypt`` on use and cached in process for a short
time. Shredding deletes every wrapped version: from then on every ciphertext of that subject, in live
stores or in any backup, fails with ``DataKeyShredded`` (a process that already unwrapped the key forgets
it within ``cache_ttl`` seconds). Default mode makes no KMS call to shred.

Default mode wraps under the current wrapping-key epoch (``stores.privacy.key_epochs``: the configured key
until the key-epoch job first rotates): the copies of a shredded wrapped key left in old pages, the WAL and
backups become unwrappable by ``unwrappable_by(shredded_at)``, when the epochs they were wrapped under have
their KMS keys scheduled for deletion.

Per-user KMS key mode (``per_user_kms_keys=True``) wraps each subject's data key under its own KMS key and
also schedules that KMS key's deletion (minimum window) on shred, for KMS-side destruction. Creating those
keys is the agent runtime's job (its IAM policy: ``deploy/iam/runtime-policy-per-user-keys.json``); the
erasure worker only uses, describes and schedules the deletion of keys carrying the managed tag.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg_pool import ConnectionPool

from stores.infra.errors import DataKeyShredded
from stores.infra.hold_gate import refuse_if_held
from stores.privacy.crypto import DataKey, key_id_of, open_sealed, open_with, seal
from stores.privacy.key_epochs import EpochPolicy, KeyEpochs

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
        self.epochs = KeyEpochs(pool, kms, kms_key_id)
        #: the key-epoch job's policy (rotation period, backup retention), for ``unwrappable_by``
        self.epoch_policy: EpochPolicy | None = None
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
            self._by_id.setdefault(key.key_id, (now + self._ttl, key, subject_key))  # a new key: no KMS call to get it
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
        open_one = self.opener()
        return [open_one(blob, context) for blob, context in items]

    def opener(self) -> Callable[[bytes, bytes], bytes | None]:
        """``decrypt_many`` one blob at a time, for a caller that opens as it reads: one key lookup (and KMS
        call) per data key for the opener's life, whatever the cache's TTL; ``None`` for a shredded key."""
        ciphers: dict[uuid.UUID, AESGCM | None] = {}

        def open_one(blob: bytes, context: bytes) -> bytes | None:
            key_id = key_id_of(blob)
            if key_id not in ciphers:
                try:
                    ciphers[key_id] = AESGCM(self.get(key_id).material)
                except DataKeyShredded:
                    ciphers[key_id] = None
            cipher = ciphers[key_id]
            return None if cipher is None else open_with(cipher, blob, context)

        return open_one

    def _generate(self, subject_key: str) -> DataKey:
        for _attempt in range(3):
            epoch, wrap_key = (None, self._create_user_kms_key(subject_key)) if self._per_user else self._wrapping()
            self.kms_calls += 1
            generated = self._kms.generate_data_key(KeyId=wrap_key, KeySpec="AES_256")
            key_id = uuid.uuid4()
            with self._pool.connection() as conn, conn.transaction():
                if not self._epoch_open(conn, epoch):
                    continue  # retired between the read and now (a rotation): wrap under the new epoch
                version = conn.execute(
                    "INSERT INTO data_key_versions (subject_key, last_version) VALUES (%s, 1) "
                    "ON CONFLICT (subject_key) DO UPDATE SET last_version = data_key_versions.last_version + 1 "
                    "RETURNING last_version",
                    (subject_key,),
                ).fetchone()
                assert version is not None
                conn.execute(
                    "INSERT INTO data_keys (key_id, subject_key, version, wrapped_key, kms_key_id, epoch) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (key_id, subject_key, version[0], generated["CiphertextBlob"], wrap_key, epoch),
                )
                if self._per_user:
                    conn.execute(
                        "INSERT INTO subject_kms_keys (subject_key, kms_key_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (subject_key, wrap_key),
                    )
            return DataKey(key_id, generated["Plaintext"])
        raise RuntimeError("the wrapping-key epoch kept changing while a data key was written")

    def _wrapping(self) -> tuple[int | None, str]:
        """(epoch, KMS key) new data keys are wrapped under: the current managed epoch, else the configured key."""
        current = self.epochs.current()
        return (None, self._kms_key_id) if current is None else (current.epoch, current.kms_key_id)

    @staticmethod
    def _epoch_open(conn: Any, epoch: int | None) -> bool:
        """Whether ``epoch`` is still unretired, its row share-locked until the caller's transaction ends (the
        job's retirement locks it to count the live keys under it: a key written now is counted)."""
        if epoch is None:
            return True
        row = conn.execute("SELECT retired_at FROM key_epochs WHERE epoch = %s FOR SHARE", (epoch,)).fetchone()
        return row is not None and row[0] is None

    def unwrappable_by(self, shredded_at: datetime) -> datetime | None:
        """By when every copy of a data key shredded at ``shredded_at`` is wrapped only under KMS keys that
        refuse use (``EpochPolicy.unwrappable_by``); ``None`` without an epoch policy. Per-user KMS key mode:
        the shred itself schedules the key's deletion, so the copies are unwrappable from the shred on."""
        if self._per_user:
            return shredded_at
        return None if self.epoch_policy is None else self.epoch_policy.unwrappable_by(shredded_at)

    def generate_many(
        self, subject_keys: Sequence[str], *, threads: int = 8, wrap: Callable[[bytes], bytes] | None = None
    ) -> int:
        """Give every subject that holds no data key yet its first one, in bulk (seeding a platform): the
        same rows ``current`` would write (version 1, wrapped under the configured KMS key), one KMS
        ``GenerateDataKey`` per subject on ``threads`` threads, the rows in one transaction by COPY, and each
        key cached as ``current`` caches it. Subjects that hold a key are left alone (``current`` finds it).

        ``wrap``: wraps 32 random bytes as KMS ``Decrypt`` under the configured key will open them (a local
        KMS whose key material is at hand: ``workers.local_kms.offline_wrapper``), instead of a KMS call per
        key. Each subject still gets a key of its own. A subject given a key meanwhile by ``current`` fails
        the whole COPY (the unique constraints), never a second version 1. Returns the keys generated. Once
        the key-epoch job has rotated, keys are wrapped by KMS under the current epoch and ``wrap`` is unused.

        Per-user KMS key mode: each subject needs its own KMS key first (and ``wrap`` cannot apply): every
        subject goes through ``current`` on the threads, and the count returned is of the subjects given."""
        if self._per_user:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                return sum(1 for _ in pool.map(self.current, subject_keys))
        wanted = sorted(set(subject_keys))
        with self._pool.connection() as conn:
            held = {
                r[0]
                for r in conn.execute(
                    "SELECT subject_key FROM data_key_versions WHERE subject_key = ANY(%s)", (wanted,)
                ).fetchall()
            }
        fresh = [s for s in wanted if s not in held]
        epoch, wrap_key = self._wrapping()
        if epoch is not None:
            wrap = None

        def one(_subject: str) -> tuple[bytes, bytes]:
            if wrap is not None:
                plain = os.urandom(32)
                return plain, wrap(plain)
            generated = self._kms.generate_data_key(KeyId=wrap_key, KeySpec="AES_256")
            return generated["Plaintext"], generated["CiphertextBlob"]

        with ThreadPoolExecutor(max_workers=threads) as pool:
            made = [
                (s, DataKey(uuid.uuid4(), plain), wrapped)
                for s, (plain, wrapped) in zip(fresh, pool.map(one, fresh), strict=True)
            ]
        if wrap is None:
            self.kms_calls += len(made)
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            if not self._epoch_open(conn, epoch):
                raise RuntimeError("the wrapping-key epoch was retired while seeding: seed again")
            with cur.copy("COPY data_key_versions (subject_key, last_version) FROM STDIN") as copy:
                for subject, _key, _wrapped in made:
                    copy.write_row((subject, 1))
            columns = "key_id, subject_key, version, wrapped_key, kms_key_id, epoch"
            with cur.copy(f"COPY data_keys ({columns}) FROM STDIN") as copy:
                for subject, key, wrapped in made:
                    copy.write_row((key.key_id, subject, 1, wrapped, wrap_key, epoch))
        until = time.monotonic() + self._ttl
        with self._lock:
            for subject, key, _wrapped in made:
                self._current[subject] = (until, key)
                self._by_id[key.key_id] = (until, key, subject)
        return len(made)

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
        so a returning user's new key survives a later sweep, and, whatever their date, those carrying an
        id shredded before); idempotent. Returns versions destroyed. The destroyed ids are tombstoned in
        ``shredded_keys`` in the deleting transaction.

        Per-user KMS key mode: the KMS keys' deletion is scheduled *first*, and the rows are deleted (with
        the KMS keys marked in ``subject_kms_keys``, one transaction) only once KMS accepted it or
        reports the key already pending deletion or gone. A failed KMS call leaves the rows in place, so
        a retry finds them and calls KMS again; deleting the rows first would leave nothing to retry from.

        The store's one gated change of keys: all of it runs in one transaction that first reads the subject's
        legal hold under the subject's hold lock (``refuse_if_held``): a held subject's keys are never shredded
        (``OwnerHeld``, nothing changed, no KMS call), whenever the hold landed before the shred reached it.
        """
        with self._pool.connection() as conn, conn.transaction():
            # the subject's hold, read under its hold lock before anything goes (``OwnerHeld``): a hold placed
            # while the shred runs waits for it, one placed before (even after the step began) stops it
            refuse_if_held(conn, [subject_key])
            rows = conn.execute(
                "SELECT key_id, kms_key_id FROM data_keys d WHERE subject_key = %s "
                "AND (%s::timestamptz IS NULL OR created_at < %s "
                "OR EXISTS (SELECT 1 FROM shredded_keys s WHERE s.key_id = d.key_id))",
                (subject_key, created_before, created_before),
            ).fetchall()
            kms_keys = sorted({r[1] for r in rows if r[1] != self._kms_key_id}) if self._per_user else []
            for kms_key in kms_keys:  # a failed call rolls the transaction back: the rows stay for the retry
                self._schedule_deletion(kms_key)
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
            # the ids tombstoned with the delete: a row written back with one later is found whatever its date
            conn.execute(
                "INSERT INTO shredded_keys (key_id) SELECT unnest(%s::uuid[]) ON CONFLICT (key_id) DO NOTHING",
                ([r[0] for r in deleted],),
            )
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

    def live_ids(self, key_ids: set[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``key_ids`` whose wrapped key exists and was never shredded (read afresh, not from the
        cache: a check's input)."""
        if not key_ids:
            return set()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT key_id FROM data_keys d WHERE key_id = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM shredded_keys s WHERE s.key_id = d.key_id)",
                (sorted(key_ids),),
            ).fetchall()
        return {r[0] for r in rows}

    def count(self, subject_key: str) -> int:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT count(*) FROM data_keys WHERE subject_key = %s", (subject_key,)).fetchone()
        return int(row[0]) if row else 0

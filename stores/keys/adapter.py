"""Adapter for the subject's data keys: crypto-shred every wrapped version (after every other store).

Shredding makes every copy of the subject's sealed blobs unreadable: old object versions, dead tuples,
backups. Per-user KMS key mode also schedules the user's own KMS key for deletion (before the rows go, so
a failed call is retried). The shredded ids are tombstoned (``shredded_keys``, in the deleting transaction).
Remaining asks the database for wrapped keys (dated before the shred, and any carrying a tombstoned id
whatever its date), KMS for each per-user key's state, and tries to open the ciphertext sample captured when
the request began. Sweeps remove the same: a row carrying a tombstoned id goes whatever its date.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stores.adapters.common import digest
from stores.adapters.interface import (
    AFTER_EVERY_OTHER,
    Beat,
    Bound,
    DataClaims,
    Disposition,
    ForgetScope,
    ItemsCheck,
    Remaining,
    Subject,
    Swept,
)
from stores.infra.errors import CiphertextInvalid
from stores.privacy.crypto import DataKey, key_id_of, open_sealed

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

GONE_STATES = frozenset({"PendingDeletion", "PendingReplicaDeletion"})
#: KMS ``Decrypt`` errors that say the wrapped key can no longer be unwrapped (its KMS key gone, disabled or
#: pending deletion, or the blob not one it wrapped); any other error is KMS failing to answer, never "unreadable"
UNWRAPPABLE = frozenset(
    {
        "NotFoundException",
        "DisabledException",
        "KMSInvalidStateException",
        "InvalidCiphertextException",
        "IncorrectKeyException",
    }
)


class KeyReads:
    """The verifier's queries: ``data_keys`` by subject key and key id, KMS key states, the sample."""

    def __init__(self, context: StoreContext) -> None:
        self._pool = context.pool
        self._kms = context.kms

    def wrapped_keys(self, subject: str, before: datetime | None) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM data_keys WHERE subject_key = %(s)s "
                "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                {"s": subject, "b": before},
            ).fetchone()
        return int(row[0]) if row else 0

    def shredded_ids_back(self, subject: str) -> int:
        """The subject's wrapped keys carrying an id shredded before (``shredded_keys``): written back by a
        re-wrap or a restore. Whatever their ``created_at``: a shredded id is never a returning user's key."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM data_keys d WHERE subject_key = %s "
                "AND EXISTS (SELECT 1 FROM shredded_keys s WHERE s.key_id = d.key_id)",
                (subject,),
            ).fetchone()
        return int(row[0]) if row else 0

    def kms_keys_still_usable(self, subject: str, before: datetime | None) -> int:
        """Per-user KMS keys of the subject (registered at creation) not pending deletion or gone."""
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
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in UNWRAPPABLE:
                return False
            raise  # KMS could not answer (internal error, throttled, denied): the check fails with the cause
        try:
            open_sealed(DataKey(key_id, plain), blob, uuid.UUID(memory_id).bytes)
        except CiphertextInvalid:
            return False
        return True


class KeysAdapter:
    name = "keys"
    after: tuple[str, ...] = (AFTER_EVERY_OTHER,)  # a shredded key must not be needed by a step still running
    batched = False
    disposition = Disposition(
        "unreadable",
        "every wrapped data key version deleted: every sealed copy anywhere is unreadable; pre-erasure "
        "database backups hold the wrapped key, usable only with kms:Decrypt on the wrapping key (per-user "
        "KMS keys: scheduled for deletion)",
    )

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.keys = context.pool, context.keys
        self.secret, self.requests = context.subject_secret, context.requests
        self.reads = KeyReads(context)

    def locate(self, subject: Subject) -> dict[str, int]:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM data_keys WHERE subject_key = %s LIMIT 1000) k",
                (subject.subject_key,),
            ).fetchone()
        return {"data_keys": int(row[0]) if row else 0}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        destroyed = self.keys.shred(subject.subject_key)
        now = datetime.now(UTC).isoformat()
        self.requests.update_record(
            subject.request_id, lambda r: r if r.keys_shredded_at else replace(r, keys_shredded_at=now)
        )
        return {"key_versions": destroyed}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        absent = [
            what
            for what, value in (
                ("the keys step's shred time", record.keys_shredded_at),
                ("the ciphertext sample capture at the start", [] if record.canaries_destroyed else record.canaries),
            )
            if value is None
        ]
        if absent:
            return Remaining(missing=tuple(absent))
        before = bound.keys_cutoff if bound else None
        counts = {
            "wrapped_keys": self.reads.wrapped_keys(subject.subject_key, before),
            "shredded_key_ids_back": self.reads.shredded_ids_back(subject.subject_key),
            "kms_keys_not_pending_deletion": self.reads.kms_keys_still_usable(subject.subject_key, before),
        }
        sample = record.ciphertext_sample
        if sample is not None:
            counts["sample_still_decrypts"] = int(
                self.reads.sample_decrypts(sample.memory_id, base64.b64decode(sample.blob))
            )
            return Remaining(counts)
        why = "destroyed after completion" if record.ciphertext_sample_destroyed else "none was captured"
        return Remaining(counts, note=f"ciphertext sample {why}")

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        cutoff = keys_shredded_at or before
        return Swept({"key_versions": self.keys.shred(subject.subject_key, created_before=cutoff)})

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        from stores.privacy.identity import subject_key

        sk = subject_key(self.secret, app_name, user_id)
        with self.pool.connection() as conn:
            keys = conn.execute(
                "SELECT key_id, version, wrapped_key FROM data_keys WHERE subject_key=%s ORDER BY version", (sk,)
            ).fetchall()
        return {"keys": digest(keys), "counts": {"keys": len(keys)}}

    # ----- item forgetting (``ItemForgetting``): nothing to forget here --------------------------------

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """Data keys hold no item content: an item forget or a session erasure keeps them (only an erasure
        shreds them, with every copy of the subject's sealed blobs). Listed in the receipt with no counts."""
        return {}

    def items_left(self, scope: ForgetScope) -> int:
        """No item content here to be left (never a check: ``items_check`` says so)."""
        return 0

    def items_check(self, scope: ForgetScope) -> ItemsCheck | None:
        """No check for any scope: a count of item content in a store that holds none could never fail."""
        return None

    def claims(self) -> DataClaims:
        """The data map: the wrapped data keys, their version counters and the per-user KMS keys' rows."""
        return DataClaims(tables=("data_keys", "data_key_versions", "subject_kms_keys"))

    def vacuum_tables(self) -> tuple[str, ...]:
        """None for the plain vacuum: the physical job rewrites ``data_keys`` whole (``KeyEpochs.compact``,
        VACUUM FULL, attested on its own), and the other two tables hold no key material."""
        return ()

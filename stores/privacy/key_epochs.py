"""Wrapping-key epochs: shredding a data key becomes physical within a stated bound, without a KMS key per user.

Every data key is wrapped under the current epoch's KMS key (``DataKeyStore`` reads it here). The key-epoch
job (``workflows/key_epochs.py``) runs every ``check_every``; when the current epoch is ``period`` old it
opens the next epoch (a new KMS key), re-wraps every live data key under it (KMS ``ReEncrypt``, indexed
pages in key order), retires each old epoch once no live data key uses it, and schedules an old epoch's KMS
key for deletion once it is retired and ``retention`` (the longest backup retention) has passed since.
A shredded data key is never re-wrapped: its copies (live pages, WAL, archives, snapshots, backups) stay
wrapped under the epochs it lived in, whose KMS keys all end refusing use. Its id is tombstoned
(``shredded_keys``): a row written back with it (by key id, not compare-and-set) is skipped by the re-wrap and
counted (``RewrapPage.skipped``), and is no live key of its epoch, so the epoch still retires and its KMS key
is still deleted. The bound (``unwrappable_by``):

    shredded_at + period + check_every   the epoch current at the shred is rotated away and retired
                + retention + check_every  and its KMS key is scheduled for deletion (KMS refuses it from
                                         then on; the key material is destroyed ``DELETION_WINDOW_DAYS`` later)

provided each run of the job ends within ``check_every``. Epoch 0 is the configured wrapping key
(``ERASURE_KMS_KEY_ID``): the job retires it like any epoch (``retired_at`` says from when no live data key
needs it), but never schedules its deletion (``erasure check`` and offline seeding use it): copies wrapped
before the first rotation stay unwrappable under it until the operator schedules its deletion, at the
earliest ``retention`` after its retirement (``Epoch.deletable_from``).

After a rotation the job rewrites ``data_keys`` (``VACUUM FULL``: the live files drop the dead tuples that
held old wrapped keys at once) and switches the WAL (``pg_switch_wal()`` then ``CHECKPOINT``: the segments
that held them become removable), where the database allows it (``compact``).

Holds: the re-wrap goes through the gate (``stores.infra.hold_gate.held_subjects``) in the transaction
that writes a page, so it serialises with a hold being placed on any of the page's owners (a hold placed
meanwhile waits for the page). It re-wraps a held owner's key all the same and counts it (``RewrapPage.held``):
a re-wrap preserves (the data key, and so every copy it opens, is the same; only the wrapping changes), and
an epoch still holding a held owner's key could never retire nor its KMS key be deleted, so no shredded key's
copies wrapped under it would ever become unwrappable. It never touches an erased subject's key: a shredded
key's id is skipped, and the compare-and-set leaves a key shredded meanwhile shredded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from botocore.exceptions import ClientError
from psycopg_pool import ConnectionPool

from stores.infra.hold_gate import held_subjects

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient

#: the pending window of an epoch key's deletion (the KMS minimum): KMS refuses the key from the request on
DELETION_WINDOW_DAYS = 7
#: the configured wrapping key's epoch (never deleted by the job)
BASE_EPOCH = 0


@dataclass(frozen=True)
class EpochPolicy:
    """How often epochs rotate, how long an old epoch's key must outlive the backups, how often the job runs."""

    period: timedelta  # ERASURE_KEY_EPOCH_DAYS
    retention: timedelta  # ERASURE_BACKUP_RETENTION_DAYS
    check_every: timedelta = timedelta(days=1)  # the job's schedule

    def rotation_due(self, current_created: datetime | None, now: datetime) -> bool:
        """Whether a run at ``now`` opens a new epoch: none managed yet, or the current one is ``period`` old."""
        return current_created is None or now >= current_created + self.period

    def deletable(self, retired_at: datetime | None, live_keys: int, now: datetime) -> bool:
        """Whether an epoch's KMS key may be scheduled for deletion: retired, no live data key under it, and
        the longest backup retention passed since its retirement (a backup taken before holds live users'
        keys wrapped under it, and must restore until it expires)."""
        return retired_at is not None and live_keys == 0 and now >= retired_at + self.retention

    def unwrappable_by(self, shredded_at: datetime) -> datetime:
        """By when every copy of a data key shredded at ``shredded_at`` is wrapped only under KMS keys that
        refuse use (epochs managed by the job; see the module docstring for the configured key's copies)."""
        return shredded_at + self.period + self.check_every + self.retention + self.check_every


@dataclass(frozen=True)
class Epoch:
    epoch: int
    kms_key_id: str
    managed: bool
    created_at: datetime
    retired_at: datetime | None = None
    deletion_scheduled_at: datetime | None = None

    def deletable_from(self, policy: EpochPolicy) -> datetime | None:
        return None if self.retired_at is None else self.retired_at + policy.retention


@dataclass(frozen=True)
class RewrapPage:
    rewrapped: int  # data keys re-wrapped under the target epoch
    gone: int  # shredded (or re-wrapped by another run) between the read and the write: left alone
    last_key_id: str  # keyset cursor ('' when the page was empty)
    skipped: int = 0  # rows carrying a shredded key's id (``shredded_keys``: an erased subject's): never re-wrapped
    held: int = 0  # of ``rewrapped``, keys of owners under a legal hold (re-wrapped: preservation, see the module)


_COLUMNS = "epoch, kms_key_id, managed, created_at, retired_at, deletion_scheduled_at"


def _epoch(row: Sequence[Any]) -> Epoch:
    return Epoch(int(row[0]), str(row[1]), bool(row[2]), row[3], row[4], row[5])


class KeyEpochs:
    """The epochs' table, the re-wrap and the retirement, over the platform's pool and KMS client."""

    def __init__(self, pool: ConnectionPool, kms: KMSClient, configured_key_id: str, *, threads: int = 8) -> None:
        self._pool = pool
        self._kms = kms
        self._configured = configured_key_id
        self._threads = threads

    # ----- read ----------------------------------------------------------------------------------

    def epochs(self) -> list[Epoch]:
        with self._pool.connection() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM key_epochs ORDER BY epoch").fetchall()
        return [_epoch(r) for r in rows]

    def current(self) -> Epoch | None:
        """The newest managed epoch (``None``: none yet, data keys are wrapped under the configured key)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM key_epochs WHERE managed ORDER BY epoch DESC LIMIT 1"
            ).fetchone()
        return _epoch(row) if row else None

    def live_keys(self, epoch: int, conn: psycopg.Connection[Any] | None = None) -> int:
        """Live data keys wrapped under an epoch (0, capped at 1: whether any is)."""
        sql, params = self._where(epoch)
        query = f"SELECT count(*) FROM (SELECT 1 FROM data_keys WHERE {sql} LIMIT 1) AS any_key"
        if conn is not None:
            row = conn.execute(query, params).fetchone()
        else:
            with self._pool.connection() as own:
                row = own.execute(query, params).fetchone()
        return int(row[0]) if row else 0

    def _where(self, epoch: int, *, live: bool = True) -> tuple[str, dict[str, Any]]:
        """The epoch's rows of ``data_keys`` (``live``: but those carrying a shredded key's id)."""
        shredded = " AND NOT EXISTS (SELECT 1 FROM shredded_keys s WHERE s.key_id = data_keys.key_id)" if live else ""
        if epoch == BASE_EPOCH:  # rows written before the first rotation carry no epoch
            return "epoch IS NULL AND kms_key_id = %(configured)s" + shredded, {"configured": self._configured}
        return "epoch = %(epoch)s" + shredded, {"epoch": epoch}

    # ----- rotate --------------------------------------------------------------------------------

    def open_next(self, policy: EpochPolicy, now: datetime, *, force: bool = False, created_key: str = "") -> Epoch:
        """The current epoch, after opening the next one when rotation is due (or ``force``).

        ``created_key``: a KMS key this step created in an attempt that failed before recording it (the
        activity's heartbeat): recorded instead of creating another."""
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO key_epochs (epoch, kms_key_id, managed) VALUES (%s, %s, false) ON CONFLICT DO NOTHING",
                (BASE_EPOCH, self._configured),
            )
        if created_key:
            with self._pool.connection() as conn:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM key_epochs WHERE kms_key_id = %s",
                    (created_key,),
                ).fetchone()
            if row is not None:  # recorded by the attempt that created it
                return _epoch(row)
        current = self.current()
        if current is not None and not force and not policy.rotation_due(current.created_at, now):
            return current
        number = (current.epoch if current else BASE_EPOCH) + 1
        key = created_key or self.create_kms_key(number)
        with self._pool.connection() as conn:
            row = conn.execute(
                "INSERT INTO key_epochs (epoch, kms_key_id, managed) VALUES (%s, %s, true) "
                f"ON CONFLICT (epoch) DO UPDATE SET epoch = key_epochs.epoch RETURNING {_COLUMNS}",
                (number, key),
            ).fetchone()
        assert row is not None
        return _epoch(row)

    def create_kms_key(self, number: int) -> str:
        created: Any = self._kms.create_key(
            Description=f"erasure-orchestrator wrapping-key epoch {number}",
            Tags=[
                {"TagKey": "erasure:managed-by", "TagValue": "erasure-orchestrator"},
                {"TagKey": "erasure:key-epoch", "TagValue": str(number)},
            ],
        )
        return str(created["KeyMetadata"]["KeyId"])

    def rewrap_page(self, source: int, target: Epoch, after_key_id: str, limit: int) -> RewrapPage:
        """Re-wrap one page of the source epoch's live data keys under ``target`` (KMS ``ReEncrypt``: the
        plain key never leaves KMS). Compare-and-set on the wrapped bytes: a key shredded meanwhile stays
        shredded, one written meanwhile is left as it is. A row carrying a shredded key's id (an erased
        subject's key written back) is skipped and counted, never re-wrapped."""
        sql, params = self._where(source, live=False)
        after = uuid.UUID(after_key_id) if after_key_id else uuid.UUID(int=0)
        with self._pool.connection() as conn:
            page = conn.execute(
                "SELECT key_id, wrapped_key, kms_key_id, "
                "EXISTS (SELECT 1 FROM shredded_keys s WHERE s.key_id = data_keys.key_id), subject_key "
                f"FROM data_keys WHERE {sql} AND key_id > %(after)s ORDER BY key_id LIMIT %(limit)s",
                {**params, "after": after, "limit": limit},
            ).fetchall()
        if not page:
            return RewrapPage(0, 0, "")
        rows = [r for r in page if not r[3]]
        skipped, last = len(page) - len(rows), str(page[-1][0])
        if not rows:
            return RewrapPage(0, 0, last, skipped)

        def one(row: Sequence[Any]) -> bytes:
            out: Any = self._kms.re_encrypt(
                CiphertextBlob=bytes(row[1]), SourceKeyId=str(row[2]), DestinationKeyId=target.kms_key_id
            )
            return bytes(out["CiphertextBlob"])

        with ThreadPoolExecutor(max_workers=self._threads) as pool:
            rewrapped = list(pool.map(one, rows))
        with self._pool.connection() as conn, conn.transaction():
            # the owners' hold locks taken and their holds read (the gate): a hold being placed waits for the page
            held = held_subjects(conn, {str(r[4]) for r in rows})
            done = conn.execute(
                "UPDATE data_keys d SET wrapped_key = given.new, kms_key_id = %s, epoch = %s "
                "FROM unnest(%s::uuid[], %s::bytea[], %s::bytea[]) AS given(key_id, old, new) "
                "WHERE d.key_id = given.key_id AND d.wrapped_key = given.old RETURNING d.key_id, d.subject_key",
                (target.kms_key_id, target.epoch, [r[0] for r in rows], [bytes(r[1]) for r in rows], rewrapped),
            ).fetchall()
        kept = sum(1 for _key, owner in done if owner in held)
        return RewrapPage(len(done), len(rows) - len(done), last, skipped, kept)

    def retire(self, epoch: int) -> Epoch | None:
        """Mark an old epoch retired once no live data key uses it (``None`` while some still does). The
        epoch's row is locked while counting: a data key being written under it (``DataKeyStore``) either
        committed before (counted) or sees the epoch retired and wraps again under the current one."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM key_epochs WHERE epoch = %s FOR UPDATE",
                (epoch,),
            ).fetchone()
            if row is None:
                return None
            found = _epoch(row)
            if found.retired_at is not None:
                return found
            if self.live_keys(epoch, conn):
                return None
            row = conn.execute(
                f"UPDATE key_epochs SET retired_at = now() WHERE epoch = %s RETURNING {_COLUMNS}",
                (epoch,),
            ).fetchone()
        return _epoch(row) if row else None

    def schedule_deletion(self, epoch: Epoch) -> None:
        """Schedule a retired managed epoch's KMS key for deletion (done already counts as done), then record it."""
        if not epoch.managed:
            raise ValueError("the configured wrapping key is never deleted by the job")
        try:
            self._kms.schedule_key_deletion(KeyId=epoch.kms_key_id, PendingWindowInDays=DELETION_WINDOW_DAYS)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            state = ""
            if code == "KMSInvalidStateException":
                state = str(self._kms.describe_key(KeyId=epoch.kms_key_id)["KeyMetadata"].get("KeyState"))
            if code != "NotFoundException" and state not in ("PendingDeletion", "PendingReplicaDeletion"):
                raise
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE key_epochs SET deletion_scheduled_at = COALESCE(deletion_scheduled_at, now()) WHERE epoch = %s",
                (epoch.epoch,),
            )

    # ----- the live files ------------------------------------------------------------------------

    def compact(self, *, switch_wal: bool) -> dict[str, str]:
        """Rewrite ``data_keys`` (the live files drop every dead tuple holding an old wrapped key) and, when
        ``switch_wal``, close the current WAL segment and checkpoint (the segments that held those tuples
        become removable; whether Postgres removes or recycles them, and whether an archive keeps them, is
        the server's configuration). What was done: ``done``, ``refused`` (no privilege) or ``off``."""
        done: dict[str, str] = {}
        statements = [("vacuum_full", "VACUUM FULL data_keys")]
        if switch_wal:
            statements += [("switch_wal", "SELECT pg_switch_wal()"), ("checkpoint", "CHECKPOINT")]
        else:
            done.update(switch_wal="off", checkpoint="off")
        with self._pool.connection() as conn:
            for name, statement in statements:
                try:
                    conn.execute(statement)  # fixed statements, no input
                    done[name] = "done"
                except psycopg.errors.InsufficientPrivilege:
                    done[name] = "refused"
        return done

"""The object store's physical clean-up: compact the volumes that hold the bytes of deleted objects.

An S3 delete removes an object version from the API, but SeaweedFS keeps its bytes in the volume file
(``<bucket>_<n>.dat``) as garbage until the volume is compacted. This step runs after the artifacts and logs
steps: it asks the SeaweedFS master (``ERASURE_S3_COMPACTION_URL``; the local stack's own master by
default) to compact every volume holding any garbage (``stores.infra.seaweedfs``), then reads each volume's
compaction revision to know it happened (the master does nothing while its own periodic vacuum runs, so a
writable volume left uncompacted is asked again, and after that the step fails and Temporal retries it).
Compacting copies a volume's live needles to a new file: reads and writes go on meanwhile (writes to that
volume move to another one for the time), so the platform is never blocked. Heartbeats while it runs.

The filer deletes an object's chunks from the volumes through a queue it runs every 1.123 s, so before it
takes its bound the step sends a marker through that queue and waits until the marker's chunk has left its
volume server (``stores.ledgers.deletion_queue``; ``ERASURE_S3_COMPACTION_FILER_URL``, the local stack's own filer by
default): the deletions queued before it have then reached the volumes, in 0.1 to 1.2 s instead of a fixed
wait. One marker serves every erasure of the worker that asked before it was written. Without a filer to send
it through (or when the filer keeps the marker inline) the step waits ``SETTLE_SECONDS``. Concurrent erasures share
a compaction, as vacuums are shared (``stores.physical.cleanup``): one that started after a request's
deletions had landed covers it. Skipped (recorded as covered) when the request deleted no object.

Where the object store offers no compaction (AWS S3 and most S3 services; the setting empty in production)
the step records the request as covered all the same and says so: ``offered`` 0 in its counts, and a
disposition that says deleted versions are gone from the API and the provider reclaims their space on its
own schedule. What it does not reach: bucket backups, read-only volumes (SeaweedFS never compacts those on
a sweep; counted as ``volumes_read_only``, and never as compacted: a request whose deletions left garbage in
one stays unattested until it is compacted), erasure-coded volumes, and the filer's metadata (object keys:
subject keys and session ids). What those keep of artifact bodies and log lines is sealed, key destroyed.

Its cost follows the volumes holding garbage, not the user's objects: the platform's own periodic vacuum
done sooner (every volume with any garbage, not only past SeaweedFS's 30 % default), shared by the erasures
that finish while one runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx

from stores.adapters.interface import Beat, Bound, Coverage, Disposition, Remaining, Subject, Swept
from stores.infra.errors import CompactionIncomplete
from stores.infra.seaweedfs import Outcome, SeaweedMaster, not_compacted
from stores.ledgers.deletion_queue import FilerDeletionQueue, MarkerInline, SharedProbe
from stores.physical import evidence, statements
from stores.physical.cleanup import CleanupBooks, covered_targets, found_any
from stores.physical.statements import StoreStatement

if TYPE_CHECKING:
    from psycopg import Connection

    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

#: the one target of this step in the clean-up books (a request is covered when this row is recorded)
TARGET = evidence.VOLUMES_BASELINE
#: what the presence probe at the start calls the objects the artifacts and logs steps delete
FOUND_KEYS = ("artifacts", "log_segments")
#: the filer's deletion queue is polled every 1.123 s: deletions have reached the volumes after this
SETTLE_SECONDS = 2.5
#: the marker must have left its volume within this (the queue may hold a huge user's 10,000 deletions);
#: past it the step fails and Temporal retries it
DRAIN_SECONDS = 120.0
ATTEMPTS = 30  # compaction requests before the step fails (and Temporal retries it), RETRY_SECONDS apart
RETRY_SECONDS = 2.0

OFFERED = Disposition(
    "physically_removed",
    "volumes holding deleted objects compacted: live objects copied into new volume files, the old files "
    "unlinked (bytes not overwritten); bucket backups, and a read-only volume until it is compacted, keep the "
    "deleted artifact and log bytes (artifact bodies and log line words sealed, key destroyed); the store's "
    "metadata keeps object keys (subject keys, session ids) until it compacts",
)
NOT_OFFERED = Disposition(
    "deleted",
    "the object store offers no compaction: deleted object versions are gone from its API and the provider "
    "reclaims their space on its own schedule; bucket backups keep them (artifact bodies and log line words "
    "sealed, key destroyed)",
)


class CompactionAdapter:
    name = "compaction"
    after: tuple[str, ...] = ("artifacts", "logs")
    batched = True  # a compaction copies whole volumes: heartbeats while it runs
    after_sweep = True  # runs once the second sweep is done, so its deletions are covered too

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.requests = context.pool, context.requests
        self.books = CleanupBooks(context.pool, "compaction")
        url = context.option("s3_compaction_url")
        self.master = SeaweedMaster(url) if url else None
        filer = context.option("s3_filer_url")
        self.queue = FilerDeletionQueue(filer, self.master) if filer and self.master else None
        self.drains = SharedProbe()  # one marker at a time for the worker's concurrent erasures
        self.disposition = OFFERED if self.master is not None else NOT_OFFERED

    def locate(self, subject: Subject) -> dict[str, int]:
        return {}  # holds nothing of any user: "found at the start" stays about the user's data

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        """Covered by a compaction that started after this request's deletions had landed, or compacted now."""
        nothing = {"compactions_run": 0, "volumes_compacted": 0, "volumes_read_only": 0}
        if self.master is None:
            self.books.record(subject.request_id, TARGET)  # nothing to compact with
            return {"offered": 0, **nothing}
        if not self._deleted_anything(subject):
            self.books.record(subject.request_id, TARGET)  # nothing of this request to compact: all zeros
            return nothing
        counts = {"offered": 1, "compactions_run": 0, "volumes_compacted": 0}
        master = self.master
        self._settle(beat)
        # SeaweedFS's own state once the deletions have landed: the volumes holding garbage (the deleted
        # needles among them) and their compaction revisions, the baseline the check compares with
        with self.pool.connection() as conn:
            taken_at = evidence.clock(conn)
        volumes = evidence.volume_items(master.volumes())
        baseline = evidence.record_baseline(self.pool, subject.request_id, TARGET, taken_at, volumes)
        landed_by = baseline.taken_at
        outcomes: list[Outcome] = []

        def compact(_conn: Connection[tuple[Any, ...]]) -> None:
            outcomes.append(self._compact(master))

        counts["compactions_run"] = self.books.cover(TARGET, landed_by, subject.request_id, beat, compact)
        if not self._judge(subject.request_id).covered:  # SeaweedFS shows a volume left: once more
            outcomes.clear()
            counts["compactions_run"] += self.books.cover(TARGET, self.books.now(), subject.request_id, beat, compact)
        done = outcomes[0] if outcomes else Outcome((), (), ())
        return {**counts, "volumes_compacted": len(done.compacted), "volumes_read_only": len(done.read_only)}

    def cover_requests(self, request_ids: Sequence[str], beat: Beat) -> dict[str, int]:
        """The physical job's pass (issue 30): once the filer's deletions reached the volumes, SeaweedFS's
        volumes holding garbage and their revisions read once as every request's baseline, then one
        compaction for all of them (once more where a volume shows no new revision)."""
        ids = list(request_ids)
        if not ids:
            return {"offered": int(self.master is not None), "compactions_run": 0}
        if self.master is None:
            self.books.record_many(ids, TARGET)  # nothing to compact with
            return {"offered": 0, "compactions_run": 0}
        master = self.master
        self._settle(beat)
        with self.pool.connection() as conn:
            taken_at = evidence.clock(conn)
        evidence.record_baselines(self.pool, ids, TARGET, taken_at, evidence.volume_items(master.volumes()))

        def compact(_conn: Connection[tuple[Any, ...]]) -> None:
            self._compact(master)

        ran = self.books.cover_many(TARGET, taken_at, ids, beat, compact)
        if not self._judge(ids[0]).covered:
            ran += self.books.cover_many(TARGET, self.books.now() or taken_at, ids, beat, compact)
        return {"offered": 1, "compactions_run": ran}

    def coverage(self, request_id: str) -> Coverage:
        """SeaweedFS's own compaction revisions against the request's baseline; where the store offers no
        compaction, covered with a note saying so."""
        if self.master is None:
            return Coverage(True, "the object store offers no compaction: its provider reclaims space", {})
        kept = evidence.baselines(self.pool, request_id).get(TARGET)
        try:
            now = self.master.volumes()
        except httpx.HTTPError as exc:  # fail closed: what cannot be read is not covered
            return Coverage(False, f"volume status unreadable: {type(exc).__name__}")
        judged = evidence.volumes_covered(self.pool, request_id, now, self.after)
        before = kept.items if kept else {}
        after = {
            f"{v.node}/{v.id}": {"revision": v.compact_revision, "read_only": v.read_only}
            for v in now.values()
            if f"{v.node}/{v.id}" in before
        }
        return Coverage(
            judged.covered,
            judged.note(),
            {
                "baseline_at": kept.taken_at.isoformat() if kept else None,
                "before": before,
                "after": after,
                "read_only": list(judged.read_only),
            },
        )

    def statement(self, kind: str, coverage: Coverage, key_unwrappable_by: datetime | None) -> StoreStatement:
        """What compaction did to the bytes, in exact words (``stores.physical.statements``): it writes new
        volume files and unlinks the old ones (nothing overwritten); without compaction, nothing at all."""
        sealed = statements.sealing(kind)
        content = (
            f"artifact bodies, artifact metadata and log line words {sealed}; object keys (subject keys, "
            "session ids) in clear"
        )
        backups = statements.Copy(
            statements.ARCHIVES_AND_BACKUPS, "deleted objects as written (bucket backups)", statements.UNTIL_RETENTION
        )
        until = statements.readable_until(kind, key_unwrappable_by)
        if self.master is None:
            return StoreStatement(
                self.name,
                "no compaction offered: deleted object versions are gone from the store's API; this job "
                "overwrote nothing (bytes not overwritten)",
                content,
                (
                    statements.Copy(
                        statements.PROVIDER_STORAGE,
                        "deleted objects' bytes",
                        "the provider reclaims the space on its own schedule",
                    ),
                    backups,
                ),
                readable_until=until,
            )
        compacted = len(coverage.evidence.get("before", {}) or {})
        return StoreStatement(
            self.name,
            f"{compacted} volume(s) holding garbage after the request's last deletion compacted: "
            "their live objects copied into new volume files, the old files unlinked (bytes not overwritten)",
            content,
            (
                statements.Copy(statements.UNLINKED_FILES, "deleted objects' bytes", statements.UNTIL_FS_REUSE),
                statements.Copy(
                    statements.FILER_METADATA, "object keys (subject keys, session ids)", "the filer's store compacts"
                ),
                backups,
            ),
            readable_until=until,
        )

    def _judge(self, request_id: str) -> evidence.Judgement:
        """SeaweedFS's own compaction revisions against the request's baseline (see ``physical_evidence``)."""
        assert self.master is not None
        return evidence.volumes_covered(self.pool, request_id, self.master.volumes(), self.after)

    def _deleted_anything(self, subject: Subject) -> bool:
        """Whether the artifacts or logs step, or the second sweep, deleted objects: what the probe found at
        the start, the log segments the logs step rewrote, or a sweep's deletion mark. An object written past
        the fence after the start and deleted by the step is left to the store's periodic vacuum (as vacuum
        leaves such rows to autovacuum)."""
        record = self.requests.record(subject.request_id)
        if found_any(record, FOUND_KEYS) or bool(record.purged_segments):
            return True
        return evidence.last_deletion(self.pool, subject.request_id, self.after) is not None

    def _settle(self, beat: Beat) -> datetime | None:
        """Wait for deletions the filer queued to reach the volumes; then "now" bounds this request's."""
        queue = self.queue
        if queue is not None:
            deadline = time.monotonic() + DRAIN_SECONDS

            def drain() -> None:
                queue.drain(deadline, lambda s: beat({"stage": "compaction", "draining": round(s, 1)}))

            try:
                self.drains.wait(drain, lambda: beat({"stage": "compaction", "draining": "shared"}))
                return self.books.now()
            except MarkerInline:
                pass  # the filer keeps small files inline: no chunk to watch, the fixed wait instead
        deadline = time.monotonic() + SETTLE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            beat({"stage": "compaction", "settling": round(left, 1)})
            time.sleep(min(1.0, left))
        return self.books.now()

    @staticmethod
    def _compact(master: SeaweedMaster) -> Outcome:
        """Compact until every writable volume that held garbage at the start has been (runs in a thread of
        its own: the caller heartbeats)."""
        before = master.volumes()
        outcome = Outcome((), (), ())
        for _ in range(ATTEMPTS):
            master.vacuum()
            outcome = not_compacted(before, master.volumes())
            if not outcome.left:
                return outcome
            time.sleep(RETRY_SECONDS)  # the master's own vacuum was running: ask again
        raise CompactionIncomplete(f"{len(outcome.left)} volume(s) holding deleted objects were not compacted")

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        """SeaweedFS's own evidence, not this step's books: every volume that held garbage once the request's
        last deletion had landed (the second sweep's included) shows a compaction revision moved on since,
        read from the volume servers. Where the store offers no compaction, and for a request that deleted
        no object, the step having run is enough; a request that deleted objects and has no evidence fails
        closed (one that ended before evidence was kept is judged by the books, and the check says so)."""
        request_id = subject.request_id
        booked = Remaining({"object_store_not_covered": int(TARGET not in covered_targets(self.pool, request_id))})
        if self.master is None or not self._deleted_anything(subject):
            return booked
        kept = evidence.baselines(self.pool, request_id).get(TARGET)
        if kept is None and bound is not None:
            return replace(booked, note=evidence.LEGACY)
        try:
            judged = self._judge(request_id)
        except httpx.HTTPError as exc:  # fail closed: what cannot be read is not covered
            return Remaining({"object_store_not_covered": 1}, note=f"volume status unreadable: {type(exc).__name__}")
        return Remaining(
            {"object_store_not_covered": int(not judged.covered)},
            reported={"volumes_read_only": len(judged.read_only)} if judged.read_only else {},
            note=judged.receipt_note(),  # a receipt's note names no volume server's address
        )

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept()  # a sweep deletes few objects; the store's periodic vacuum removes what it leaves

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {"counts": {}}  # holds nothing of any user

"""The physical clean-up job's activities (``workflows/physical.py``, issue 30).

``physical_begin`` bounds the run and takes the open requests (``stores.books.physical_pending``);
``physical_cover`` runs one physical store's pass for all of them (its adapter's ``cover_requests``,
heartbeating while it blocks); ``physical_attest`` judges each request from every physical store's own
evidence (``coverage``) and signs its attestation (``verifier.receipts.attestation``) with each store's
statement of what its pass did to the bytes and which copies remain (``stores.physical.statements``); ``physical_watch``
counts the open requests past their window and sets the ``erasure_physical_overdue`` gauge. They run on the
physical task queue, never in an erasure's activity slots. Request ids, store names and counts only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from temporalio import activity

from activities.key_epochs import policy_of
from activities.support import PlatformActivities, count
from stores.adapters.interface import Coverage, PhysicalCleanup
from stores.adapters.registry import AdapterRegistry
from stores.books import physical_pending
from stores.physical import evidence
from stores.physical.statements import keys_statement, statement_of
from stores.platform import Platform
from verifier.receipts.attestation import attestation_body, attestation_bytes, attestation_key, store_attestation
from verifier.receipts.issuing import load_receipt, software_version
from verifier.receipts.signing import digest, sign, signing_key
from workflows.contracts.physical import (
    PhysicalActivityNames,
    PhysicalAttested,
    PhysicalAttestInput,
    PhysicalBeginInput,
    PhysicalBegun,
    PhysicalCovered,
    PhysicalCoverInput,
    PhysicalKeysDone,
    PhysicalKeysInput,
    PhysicalWatch,
)

log = structlog.get_logger("activities.physical_job")


def physical_stores(registry: AdapterRegistry) -> list[str]:
    """The registered physical clean-up stores the job runs, in plan order."""
    return [a.name for a in registry.in_order() if isinstance(a, PhysicalCleanup)]


class PhysicalJobActivities(PlatformActivities):
    def __init__(self, platform: Platform, signing_seed: bytes) -> None:
        super().__init__(platform)
        self._key = signing_key(signing_seed)

    def _store(self, name: str) -> PhysicalCleanup:
        adapter = self.platform.adapters.get(name)
        assert isinstance(adapter, PhysicalCleanup), f"{name} is not a physical clean-up store"
        return adapter

    @activity.defn(name=PhysicalActivityNames.BEGIN)
    def physical_begin(self, inp: PhysicalBeginInput) -> PhysicalBegun:
        pool = self.platform.pool
        started = physical_pending.begin_run(pool, inp.run_id)
        pending = physical_pending.open_before(pool, started, inp.limit)
        ids = [p.request_id for p in pending]
        erasures = sum(1 for p in pending if p.kind == "erasure")
        log.info("physical_run_begun", run=inp.run_id, requests=len(ids))
        return PhysicalBegun(started.isoformat(), ids, physical_stores(self.platform.adapters), erasures)

    @activity.defn(name=PhysicalActivityNames.COVER)
    def physical_cover(self, inp: PhysicalCoverInput) -> PhysicalCovered:
        def beat(details: dict[str, Any]) -> None:
            activity.heartbeat({"store": inp.store, **details})

        counts = self._store(inp.store).cover_requests(inp.request_ids, beat)
        log.info("physical_store_covered", run=inp.run_id, store=inp.store, requests=len(inp.request_ids))
        return PhysicalCovered(inp.store, counts)

    @activity.defn(name=PhysicalActivityNames.KEYS)
    def physical_keys(self, inp: PhysicalKeysInput) -> PhysicalKeysDone:
        """Rewrite ``data_keys`` and (``full``) switch the WAL: the shredded keys' wrapped copies leave the live
        files (``KeyEpochs.compact``: the statement a managed database refuses is reported ``refused``)."""
        if inp.rewrite == "off":
            return PhysicalKeysDone({"vacuum_full": "off", "switch_wal": "off", "checkpoint": "off"})
        done = self.platform.keys.epochs.compact(switch_wal=inp.rewrite == "full")
        log.info("physical_keys_rewritten", **done)
        return PhysicalKeysDone(done)

    @activity.defn(name=PhysicalActivityNames.ATTEST)
    def physical_attest(self, inp: PhysicalAttestInput) -> PhysicalAttested:
        pool = self.platform.pool
        started = datetime.fromisoformat(inp.started_at)
        policy = policy_of(inp.epoch_days, inp.retention_days, inp.check_hours)
        pending = {p.request_id: p for p in physical_pending.open_of(pool, inp.request_ids)}
        attested = not_covered = 0
        for n, request_id in enumerate(inp.request_ids):
            activity.heartbeat({"attested": attested, "of": len(inp.request_ids), "at": n})
            item = pending.get(request_id)
            if item is None:
                continue  # attested by an earlier attempt of this run
            coverage: dict[str, Coverage] = {name: self._store(name).coverage(request_id) for name in inp.stores}
            if not all(c.covered for c in coverage.values()):
                not_covered += 1
                log.warning("physical_not_covered", run=inp.run_id, request=request_id)
                continue
            receipt = load_receipt(self.platform, request_id)
            if receipt is None:  # filed as its receipt was being stored: attested once there is one to link
                not_covered += 1
                log.warning("physical_no_receipt_yet", run=inp.run_id, request=request_id)
                continue
            with pool.connection() as conn:
                now = evidence.clock(conn)
            bound = policy.unwrappable_by(item.deleted_by) if item.kind == "erasure" else None
            said = [statement_of(n, self._store(n), item.kind, c, bound) for n, c in coverage.items()]
            if item.kind == "erasure":  # the keys step shredded the user's key: its wrapped copies, said too
                said.append(keys_statement(inp.keys_table, bound))
            body = attestation_body(
                item,
                digest(receipt),
                inp.run_id,
                started,
                coverage,
                now,
                bound,
                {"name": "erasure-orchestrator", "version": software_version()},
                inp.keys_table if item.kind == "erasure" else {},
                said,
            )
            document = store_attestation(pool, inp.run_id, sign(body, self._key))
            self.platform.s3.put_object(
                Bucket=self.platform.config.receipt_bucket,
                Key=attestation_key(request_id),
                Body=attestation_bytes(document),
                ContentType="application/json",
            )
            physical_pending.mark_attested(pool, request_id, inp.run_id)
            attested += 1
        physical_pending.finish_run(pool, inp.run_id, len(inp.request_ids), attested, inp.counts)
        count("erasure_physical_attested_total", "physical attestations signed", attested)
        return PhysicalAttested(attested, not_covered)

    @activity.defn(name=PhysicalActivityNames.WATCH)
    def physical_watch(self) -> PhysicalWatch:
        pool = self.platform.pool
        overdue, first = physical_pending.overdue(pool, limit=20)
        still_open = physical_pending.open_count(pool)
        meter = activity.metric_meter()
        meter.create_gauge("erasure_physical_overdue", "requests past the physical window without an attestation").set(
            overdue
        )
        meter.create_gauge("erasure_physical_open", "requests still owed a physical clean-up pass").set(still_open)
        if overdue:
            log.error("physical_window_missed", overdue=overdue)
        return PhysicalWatch(still_open, overdue, first)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.physical_begin, self.physical_cover, self.physical_keys, self.physical_attest, self.physical_watch]

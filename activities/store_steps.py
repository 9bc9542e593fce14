"""Store steps of the saga: one activity per kind of store work, the adapter named in the input.

``erase_store_unless_held`` runs one adapter's ``erase`` with the request's raw user id (looked up here,
never passed through Temporal), resuming from the cursor in the last heartbeat of a previous attempt.
A batched step reads the hold again after every batch's heartbeat: a hold placed while it runs stops it
before its next batch, with the cursor it resumes from once the hold is released.
``sweep_stores_unless_held`` is the second sweep: every adapter of the plan again, side by side in plan
order, for anything a late writer slipped past the fence; its counts name what the stores kept for held
owners too (``derived_rows_held``: a summary of the subject's rows under a held user). Both read the hold
store right before their work, after everything else they look up, and do nothing while a hold exists: the
result says ``held`` and the saga waits for the release, then runs the step again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio import activity

from activities.support import PlatformActivities, beat, count, heartbeat_details
from stores.adapters.interface import Subject, Swept
from stores.adapters.registry import AdapterRegistry
from stores.adapters.sweeps import sweep_stores
from stores.ledgers.owner_holds import OwnerHeld
from stores.physical.evidence import mark_deleted
from stores.platform import Platform
from stores.privacy.redaction import sensitive
from workflows.contracts.erasure import Activities, StepResult, StoreStepInput, SweepStoresInput


def _beat(details: dict[str, Any]) -> None:
    beat(**details)


class HeldBetweenBatches(Exception):
    """A hold found between two batches of a step: the step stops there (never escapes the activity)."""

    def __init__(self, cursor: dict[str, Any]) -> None:
        super().__init__("a legal hold was placed while the step ran")
        self.cursor = cursor


def erase_in(
    adapters: AdapterRegistry,
    subject: Subject,
    store: str,
    cursor: dict[str, Any] | None = None,
    held: Callable[[], bool] | None = None,
) -> StepResult:
    """One adapter's erase for the subject (raw id known), resumed from the last heartbeat's cursor (else
    ``cursor``: where a run stopped by a hold left off). ``held``: read after every batch's heartbeat, before
    the next batch; a hold found there stops the step, its result ``held`` with the cursor to resume from."""
    adapter = adapters.get(store)

    start = heartbeat_details(dict(cursor or {}))
    last = [start]

    def guarded(details: dict[str, Any]) -> None:
        _beat(details)
        last[0] = details
        if held is not None and held():
            raise HeldBetweenBatches(details)

    with sensitive(*([subject.user_id] if subject.user_id else [])):
        try:
            counts = adapter.erase(subject, start, guarded)
        except HeldBetweenBatches as stop:
            return StepResult(store, held=True, resume=stop.cursor)
        except OwnerHeld:  # a store's gate found the hold inside its change: that batch changed nothing
            return StepResult(store, held=True, resume=last[0])
    return StepResult(store, counts)


def sweep_all(
    adapters: AdapterRegistry, subject: Subject, stores: Sequence[str], deleted_in: set[str] | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """The second sweep: the one sweep loop (``stores.adapters.sweeps``) with no date bound, a heartbeat as
    each store ends; returns (found, reported) counts, merged in plan order. Count names are the adapters'
    own; a name two stores share is prefixed by the store. ``deleted_in`` collects the stores where the sweep
    removed something, as each store ends: a store's gate that stops the sweep (``OwnerHeld``) leaves the
    stores swept before it named, so their deletions are still marked for the physical clean-up."""

    def done(name: str, one: Swept) -> None:
        if deleted_in is not None and any(one.found.values()):
            deleted_in.add(name)
        beat(phase=name, found=sum(one.found.values()))

    swept = sweep_stores(adapters, subject, stores, on_done=done)
    return swept.found, swept.reported


class StoreStepActivities(PlatformActivities):
    """``adapters``: the platform's registry unless given (embedding, tests that wrap one store)."""

    def __init__(self, platform: Platform, adapters: AdapterRegistry | None = None) -> None:
        super().__init__(platform)
        self.adapters = adapters if adapters is not None else platform.adapters

    @activity.defn(name=Activities.ERASE_STORE_UNLESS_HELD)
    def erase_store_unless_held(self, inp: StoreStepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        if self.held(inp.subject_key):
            return StepResult(inp.store, held=True, resume=dict(inp.cursor))
        return erase_in(self.adapters, subject, inp.store, inp.cursor, lambda: self.held(inp.subject_key))

    @activity.defn(name=Activities.SWEEP_STORES_UNLESS_HELD)
    def sweep_stores_unless_held(self, inp: SweepStoresInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        if self.held(inp.subject_key):
            return StepResult("sweep", held=True)
        deleted_in: set[str] = set()
        try:
            found, reported = sweep_all(self.adapters, subject, inp.stores, deleted_in)
        except OwnerHeld:  # a store's gate found a hold placed since: the sweep runs again after the release
            mark_deleted(self.platform.pool, inp.request_id, deleted_in)
            return StepResult("sweep", held=True)
        # by when the sweep's deletions were done, per store: the physical clean-up's evidence must be read
        # after it to cover them (``stores.physical.evidence``)
        mark_deleted(self.platform.pool, inp.request_id, deleted_in)
        self.platform.requests.merge_record(inp.request_id, second_sweep=found)
        for store, n in found.items():
            count("erasure_late_writes_found", "late writes removed by sweeps", n, store=store, sweep="second")
        # the step's counts (progress, the receipt's steps) say what a hold kept, as an erase step's do; the
        # record's ``second_sweep`` keeps the findings only
        return StepResult("sweep", {**found, **reported})

    def held(self, subject_key: str) -> bool:
        """Whether a legal hold exists for the subject now (the hold store is the authority)."""
        return self.platform.requests.active_hold(subject_key) is not None

    def activities(self) -> list[Callable[..., Any]]:
        return [self.erase_store_unless_held, self.sweep_stores_unless_held]

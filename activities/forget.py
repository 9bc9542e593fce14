"""Item forgetting's activities: apply a forget at its strength, verify it held, sign its receipt.

Each opens the request's sealed payload (raw user id, spans, state keys, session id) from the forget
request store; nothing personal goes back to Temporal: results are counts, item ids and check verdicts.
``apply`` places the tombstone first and is idempotent (the tombstone id is fixed at filing), so a retry
after partial success changes nothing more.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.support import PlatformActivities, beat, keep_sensitive, non_retryable
from stores.adapters.interface import ForgetScope, ItemForgetting, ItemsCheck, ScopedItemForgetting, Subject
from stores.adapters.registry import AdapterRegistry
from stores.forgetting.item_forget import ForgetOutcome, ItemForgetter, session_items, session_texts
from stores.forgetting.requests import ForgetPayload, ForgetRequestRow
from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.ledgers.forget_tombstones import TombstoneMatcher, journal_form
from stores.ledgers.lifecycle_journal import LifecycleEntry
from stores.ledgers.owner_holds import OwnerHeld
from stores.privacy.identity import session_ref, subject_of_stored
from verifier.receipts.attestation import file_physical
from verifier.receipts.issuing import issue_once, software_version, verifications_json
from verifier.receipts.signing import FORGET_SCHEMA_ID, digest, sign, signing_key
from workflows.contracts import error_types
from workflows.contracts.forget import (
    ForgetActivityNames,
    ForgetApplied,
    ForgetCheck,
    ForgetFinish,
    ForgetReceiptInput,
    ForgetReceiptRef,
    ForgetStep,
    ForgetVerification,
    ForgetVerifyInput,
)

#: the forget's one first step, run by this activity itself (``ItemForgetter``): the memory store's items by
#: (subject key, id) and the rows derived from them through provenance (any owner). It places the tombstone,
#: which defines what every other store is asked (``ForgetScope``), so it cannot be one adapter among the
#: others; its checks are ``recall``, ``store`` and ``state``. Every other registered store is asked through
#: its adapter's ``ItemForgetting``, built-in stores included, or holds nothing of the subject.
FIRST_STEP = "memory"


class ForgetActivities(PlatformActivities):
    def __init__(self, platform: Any, signing_seed: bytes, adapters: AdapterRegistry | None = None) -> None:
        super().__init__(platform)
        self._key = signing_key(signing_seed)
        self._adapters = adapters  # None: the platform's registry (the worker's own)

    @property
    def registry(self) -> AdapterRegistry:
        return self._adapters if self._adapters is not None else self.platform.adapters

    # ----- the request -----------------------------------------------------------------------------

    def _open(self, request_id: str, subject_key: str, app_name: str) -> tuple[ForgetRequestRow, ForgetPayload]:
        store = self.platform.forget_requests
        row = store.get(request_id)
        if row.subject_key != subject_key or row.app_name != app_name:
            raise non_retryable("subject key does not match the request", error_types.INVALID_IDENTIFIER)
        payload = store.payload(request_id)
        if payload is None:
            raise non_retryable("the request's payload was already dropped", error_types.USER_ID_FORGOTTEN)
        keep_sensitive(payload.user_id, *payload.spans, *payload.state_keys, *payload.probes)
        if payload.session_id:
            keep_sensitive(payload.session_id)
        # the payload's id: a raw id checked at intake, or the subject key a row was filed under (expiry)
        if subject_of_stored(self.platform.config.subject_secret, app_name, payload.user_id) != subject_key:
            raise non_retryable("subject key does not match the request", error_types.INVALID_IDENTIFIER)
        return row, payload

    def _tombstone_matcher(self, row: ForgetRequestRow) -> TombstoneMatcher:
        placed = self.platform.forgetting.get(row.tombstone_id)
        return TombstoneMatcher(self.platform.config.subject_secret, [placed] if placed else [])

    @activity.defn(name=ForgetActivityNames.BEGIN)
    def forget_begin(self, inp: ForgetStep) -> None:
        self._open(inp.request_id, inp.subject_key, inp.app_name)
        self.platform.forget_requests.set_state(inp.request_id, "running")

    # ----- apply -----------------------------------------------------------------------------------

    def _own_ids(self, subject_key: str, ids: list[str]) -> list[str]:
        with self.platform.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id FROM memories WHERE subject_key = %s AND id = ANY(%s::uuid[])", (subject_key, ids)
            ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def _refuse_if_held(self, sk: str, request_id: str) -> None:
        """A hold always wins: nothing more is deleted (a suppression deletes nothing and may go ahead). An
        earlier attempt of this request (or this one, before the hold came) may have deleted rows: said, in
        the details. Asked again right before the other stores change (their rows are the subject's own)."""
        if self.platform.requests.active_hold(sk) is None:
            return
        raise self._held(sk, request_id)

    def _held(self, sk: str, request_id: str) -> ApplicationError:
        return ApplicationError(
            "a legal hold is active on the subject",
            {
                "deleted_before_hold": ItemForgetter(self.platform.pool, self.platform.forgetting).recorded(
                    sk, request_id
                )
            },
            type=error_types.LEGAL_HOLD,
            non_retryable=True,
        )

    def _uncovered(self, sk: str, app: str, user: str, request_id: str) -> None:
        """Fail closed before anything changes: a registered store that holds the subject's data and that
        neither the first step nor a ``forget_items`` covers could keep the forgotten items."""
        subject = Subject(request_id, sk, app, user)
        for adapter in self.registry.in_order():
            if adapter.name == FIRST_STEP or isinstance(adapter, ItemForgetting):
                continue
            if any(v > 0 for v in adapter.locate(subject).values()):
                raise non_retryable(
                    f"store {adapter.name!r} holds the subject's data and cannot forget items: the forget "
                    "cannot be completed (give its adapter forget_items)",
                    error_types.PLAN_INCOMPLETE,
                )

    def _listed(self, stores: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """Every registered store, by name, with what this forget did there (``{}``: its ``forget_items`` had
        nothing to do for this strength, e.g. the data keys, or the sessions for an item forget)."""
        return {a.name: dict(stores.get(a.name, {})) for a in self.registry.in_order()}

    def _scope(self, row: ForgetRequestRow, payload: ForgetPayload, gone: list[str]) -> ForgetScope:
        """What this request covers, for the stores' ``forget_items`` and ``items_left``: the request's items,
        the rows its tombstone names and those it deleted (``gone``), the erased session (a session erasure's
        only), the tombstone, the raw user id (in memory only)."""
        placed = self.platform.forgetting.get(row.tombstone_id)
        named = placed.memory_ids if placed else frozenset()
        matcher = TombstoneMatcher(self.platform.config.subject_secret, [placed] if placed else [])
        ids = frozenset([*row.memory_ids, *named, *gone])
        sid = payload.session_id if row.strength == "erase_session" and payload.session_id else None
        ref = session_ref(row.subject_key, sid) if sid else None
        return ForgetScope(
            row.request_id,
            row.subject_key,
            row.app_name,
            row.strength,
            ids,
            ref,
            matcher.covers,
            session_id=sid,
            user_id=payload.user_id,
        )

    def _other_stores(
        self, row: ForgetRequestRow, payload: ForgetPayload, gone: list[str]
    ) -> dict[str, dict[str, int]]:
        """Every registered store but the first step's, asked through its ``forget_items`` to forget what this
        request covers (its counts), and the others (nothing of the subject there: checked first)."""
        sk = row.subject_key
        scope = self._scope(row, payload, gone)
        done: dict[str, dict[str, int]] = {}
        self._refuse_if_held(sk, row.request_id)  # the other stores' items are the subject's own
        for adapter in self.registry.in_order():
            if adapter.name == FIRST_STEP:
                continue
            if isinstance(adapter, ItemForgetting):
                beat(stage=adapter.name)
                done[adapter.name] = dict(adapter.forget_items(scope, _beat_for(adapter.name)))
            else:
                done[adapter.name] = {"located": 0}
        return done

    @activity.defn(name=ForgetActivityNames.APPLY)
    def forget_apply(self, inp: ForgetStep) -> ForgetApplied:
        try:
            return self._apply(inp)
        except OwnerHeld as held:  # a store's gate saw a hold committed since the reads above: nothing changed
            raise self._held(inp.subject_key, inp.request_id) from held

    def _apply(self, inp: ForgetStep) -> ForgetApplied:
        row, payload = self._open(inp.request_id, inp.subject_key, inp.app_name)
        sk, app, user = inp.subject_key, inp.app_name, payload.user_id
        if row.strength != "suppress":
            self._refuse_if_held(sk, row.request_id)
        if row.strength != "suppress":
            self._uncovered(sk, app, user, row.request_id)
        beat(stage="tombstone")
        if row.strength == "suppress":
            own = self._own_ids(sk, row.memory_ids)
            self.platform.forgetting.place(
                sk,
                app,
                "suppress",
                memory_ids=own,
                spans=payload.spans,
                state_keys=payload.state_keys,
                request_id=row.request_id,
                tombstone_id=row.tombstone_id,
            )
            return ForgetApplied({"items_hidden": len(own), "refused_ids": len(row.memory_ids) - len(own)})
        forgetter = ItemForgetter(self.platform.pool, self.platform.forgetting)
        if row.strength == "erase_session":
            return self._erase_session(row, payload, forgetter)
        outcome = forgetter.forget(
            sk,
            app,
            user,
            row.memory_ids,
            spans=payload.spans,
            state_keys=payload.state_keys,
            request_id=row.request_id,
            tombstone_id=row.tombstone_id,
        )
        self._journal(row, outcome)
        memory = {
            "items": outcome.items,
            "derived_rows": outcome.derived,
            "state_keys": outcome.state_keys,
            "refused_ids": outcome.refused_ids,
            "held": outcome.held,
        }
        stores = {FIRST_STEP: memory, **self._other_stores(row, payload, outcome.derived_ids)}
        return ForgetApplied(_flat(stores), outcome.derived_ids, self._listed(stores))

    def _journal(self, row: ForgetRequestRow, outcome: ForgetOutcome, items: list[str] | None = None) -> None:
        """Keep the forget in the lifecycle journal (outside the database), so a restore replays it."""
        tombstone = self.platform.forgetting.get(row.tombstone_id)
        event = "expired" if row.reason == "retention_expiry" else "forgotten"
        entry = LifecycleEntry(
            event,
            row.subject_key,
            row.app_name,
            sorted(items if items is not None else row.memory_ids),
            derived_ids=outcome.derived_ids,
            tombstone=journal_form(tombstone) if tombstone else None,
            id=row.request_id,  # a retried step writes the same entry again
        )
        self.platform.lifecycle_journal.record(entry)

    def _erase_session(self, row: ForgetRequestRow, payload: ForgetPayload, forgetter: ItemForgetter) -> ForgetApplied:
        """The session's permanent tombstone, then the first step (its memory rows: what it alone held goes,
        what a kept session shares loses it), then every other store through its adapter's ``forget_items``
        (the session's rows, artifacts and log lines)."""
        sk, app, user, sid = row.subject_key, row.app_name, payload.user_id, str(payload.session_id)
        self.platform.ledger.mark_sessions(app, [sid], sk, row.request_id)  # permanent: never re-ingested
        with self.platform.pool.connection() as conn:  # what came from this session alone; what a kept one shares
            parts = session_items(conn, sk, sid, set(self.platform.ledger.sessions_of(sk)), row.request_id)
            texts = session_texts(conn, sk, parts.only, self.platform.memory_store.decrypt_row)
        outcome = forgetter.forget(
            sk,
            app,
            user,
            parts.only,
            request_id=row.request_id,
            tombstone_id=row.tombstone_id,
            strength="erase_session",
            detach=parts,
            texts=texts,  # the same content written back by another door is refused too
        )
        self._journal(row, outcome, parts.only)
        stores = {
            FIRST_STEP: {
                "items": outcome.items,
                "derived_rows": outcome.derived,
                "detached": outcome.detached,
                "held": outcome.held,
            },
            **self._other_stores(row, payload, [*parts.only, *outcome.derived_ids]),
        }
        return ForgetApplied(_flat(stores), outcome.derived_ids, self._listed(stores))

    # ----- verify ----------------------------------------------------------------------------------

    def _reingest(self, app: str, user: str, matcher: TombstoneMatcher) -> tuple[int, int]:
        """Every one of the user's sessions through the memory service's ingestion decision again (a backfill
        job's path), as a dry run: nothing is written, so verifying never re-creates a deleted row, ingests a
        session that never was, or sets off eviction. (sessions run, rows that would come back forgotten)."""
        platform = self.platform

        async def run() -> tuple[int, int]:
            service = platform.adk_session_service()
            done = back = 0
            try:
                for stored, sid in platform.sessions.filed_sessions(app, user):
                    session = await service.get_filed_session(app_name=app, stored=stored, session_id=sid)
                    if session is not None:
                        rows = await platform.memory_service.would_ingest_filed_session(session)
                        back += sum(matcher.covers(str(r.id), r.text) for r in rows)
                        done += 1
                        beat(stage="reingest", sessions=done)
            finally:
                await service.db_engine.dispose()
            return done, back

        return asyncio.run(run())

    def _recall(self, app: str, user: str, query: str) -> list[tuple[str, str]]:
        async def run() -> list[tuple[str, str]]:
            found = await self.platform.memory_service.search_memory(app_name=app, user_id=user, query=query)
            return [(m.id or "", " ".join(p.text or "" for p in (m.content.parts or []))) for m in found.memories]

        return asyncio.run(run())

    @activity.defn(name=ForgetActivityNames.VERIFY)
    def forget_verify(self, inp: ForgetVerifyInput) -> ForgetVerification:
        row, payload = self._open(inp.request_id, inp.subject_key, inp.app_name)
        sk, app, user = inp.subject_key, inp.app_name, payload.user_id
        matcher = self._tombstone_matcher(row)
        checks: list[ForgetCheck] = []
        if not matcher:
            checks.append(ForgetCheck("tombstone", False, {}, "the request's tombstone is missing"))
            return ForgetVerification("after_reingest" if inp.reingest else "after_forget", False, checks)
        reingested, would_return = self._reingest(app, user, matcher) if inp.reingest else (0, 0)

        probes = [*payload.probes, *payload.spans] or ["*"]
        recalled = 0
        for probe in probes:
            if row.strength == "suppress":  # the suppression is the recall filter: asked through it
                found = self._recall(app, user, probe)
            else:  # what was deleted: the store itself, unfiltered, by the subject key (a check that can fail)
                found = [
                    (str(m.id), m.text)
                    for m in self.platform.memory_store.search_subject(app, sk, probe, 50, everything=True)
                ]
            recalled += sum(matcher.covers(i, text) for i, text in found)
        checks.append(
            ForgetCheck(
                "recall", recalled == 0, {"probes": len(probes), "recalled": recalled, "reingested": reingested}
            )
        )
        stored, kept = self._stored(sk, row, matcher)
        if row.strength == "suppress":
            checks.append(ForgetCheck("store", True, {"kept": kept}, "suppressed items are kept, hidden from recall"))
        else:
            checks.append(ForgetCheck("store", stored == 0, {"stored_again": stored}))
            states = self._state_keys_left(app, user, payload.state_keys)
            checks.append(ForgetCheck("state", states == 0, {"state_keys_left": states}))
        if row.strength != "suppress":  # every other store: read as it is, by its adapter's own reads
            checks += self._store_checks(self._scope(row, payload, []))
        if inp.reingest and row.strength != "suppress":  # a suppression blocks recall, not writes: recall checks it
            counts = {"sessions": reingested, "forgotten_rows_it_would_write": would_return}
            checks.append(ForgetCheck("reingest", would_return == 0, counts))
        phase = "after_reingest" if inp.reingest else "after_forget"
        return ForgetVerification(phase, all(c.passed for c in checks), checks)

    def _store_checks(self, scope: ForgetScope) -> list[ForgetCheck]:
        """One check per registered store with ``forget_items`` (but the first step's), named as its adapter
        says (``ScopedItemForgetting``; else by the adapter's name), where the scope leaves something there
        to check."""
        checks: list[ForgetCheck] = []
        for adapter in self.registry.in_order():
            if adapter.name == FIRST_STEP or not isinstance(adapter, ItemForgetting):
                continue
            shown = (
                adapter.items_check(scope) if isinstance(adapter, ScopedItemForgetting) else ItemsCheck(adapter.name)
            )
            if shown is not None:
                left = adapter.items_left(scope)
                checks.append(ForgetCheck(shown.name, left == 0, {shown.count: left}))
        return checks

    def _stored(self, subject_key: str, row: ForgetRequestRow, matcher: TombstoneMatcher) -> tuple[int, int]:
        """(forgotten items found in the store again, by id or by a forgotten span; items of the request kept).
        Reads the user's rows directly (bypassing the memory service's filters): cost follows their rows."""
        ids = [uuid.UUID(i) for i in row.memory_ids]
        with self.platform.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, content_sealed FROM memories WHERE subject_key = %s", (subject_key,)
            ).fetchall()
        stored = kept = 0
        for row_id, sealed in rows:
            if row_id in ids:
                kept += 1
            try:
                text = self.platform.memory_store.decrypt_row(row_id, bytes(sealed))
            except (DataKeyShredded, CiphertextInvalid):  # unreadable for good: nothing of it can come back
                continue  # (a KMS or database error is raised: this count is a check, it never passes unread)
            if matcher.covers(str(row_id), text):
                stored += 1
        return stored, kept

    def _state_keys_left(self, app: str, user: str, state_keys: list[str]) -> int:
        bare = [k.removeprefix("user:") for k in state_keys]
        if not bare:
            return 0
        with self.platform.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM user_states, jsonb_object_keys(state) AS k(key) "
                "WHERE app_name = %s AND user_id = ANY(%s) AND k.key = ANY(%s)",
                (app, self.platform.sessions.stored_ids(app, user), bare),
            ).fetchone()
        return int(row[0]) if row else 0

    # ----- receipt and finish ----------------------------------------------------------------------

    @activity.defn(name=ForgetActivityNames.RECEIPT)
    def forget_receipt(self, inp: ForgetReceiptInput) -> ForgetReceiptRef:
        def signed() -> dict[str, Any]:
            row = self.platform.forget_requests.get(inp.request_id)
            physical = self._physical(inp)
            body = {
                "schema": FORGET_SCHEMA_ID,
                "request_id": inp.request_id,
                "subject_key": inp.subject_key,
                "app_name": inp.app_name,
                "strength": inp.strength,
                "status": inp.status,
                "tombstone_id": row.tombstone_id,
                "items": sorted(row.memory_ids),
                "counts": dict(inp.counts),
                "derived_rows_removed": sorted(inp.derived_ids),
                "stores": {name: dict(counts) for name, counts in sorted(inp.stores.items())},
                "received_at": row.received_at.isoformat(),
                "completed_at": datetime.fromisoformat(inp.completed_at).isoformat(),
                "verifications": verifications_json(inp.verifications),
                "physical": physical,
                "software": {"name": "erasure-orchestrator", "version": software_version()},
                "issued_at": datetime.now(UTC).isoformat(),
            }
            return sign(body, self._key)

        document = issue_once(self.platform, inp.request_id, inp.subject_key, signed)
        return ForgetReceiptRef(inp.request_id, digest(document))

    def _physical(self, inp: ForgetReceiptInput) -> dict[str, Any]:
        """A destructive forget is filed with the platform's physical job (issue 30): its deleted rows' dead
        tuples go at the job's next run, attested by then; a suppression deletes nothing. One whose check
        failed (``verification_failed``) deleted rows all the same: filed too (issue 39)."""
        deleted = inp.status == "completed" or any(v > 0 for v in dict(inp.counts).values())
        if inp.strength == "suppress" or not deleted:
            return {"state": "not_needed"}
        return file_physical(self.platform.pool, inp.request_id, "forget", self.platform.config.physical_window)

    @activity.defn(name=ForgetActivityNames.FINISH)
    def forget_finish(self, inp: ForgetFinish) -> None:
        store = self.platform.forget_requests
        store.set_state(inp.request_id, inp.status, {"counts": dict(inp.counts)})
        store.close(inp.request_id)  # the personal payload goes; the tombstone keeps keyed hashes

    def activities(self) -> list[Callable[..., Any]]:
        return [self.forget_begin, self.forget_apply, self.forget_verify, self.forget_receipt, self.forget_finish]


def _beat_for(stage: str) -> Callable[[dict[str, Any]], None]:
    def report(details: dict[str, Any]) -> None:
        beat(stage=stage, **details)

    return report


def _flat(stores: dict[str, dict[str, int]]) -> dict[str, int]:
    """The per-store counts as one mapping (the workflow's progress and result): summed by name."""
    flat: dict[str, int] = {}
    for counts in stores.values():
        for name, value in counts.items():
            if name != "located":
                flat[name] = flat.get(name, 0) + value
    return flat

"""Retention expiry's activities: a page of expired rows by the expiry index, and one group's forget filed.

``expiry_file`` reads the user id the group's own rows are filed under (``memories.user_id``: the subject
key; a raw id in rows from before migration 0015), checks it against the subject key, seals it with the
rows' words (the verifier's recall probes) in the forget request store, and returns only the request id and
the row ids. Filing is idempotent: the request id is derived from the subject and the sorted row ids, so a
retried attempt or a re-run sweep finds the request it filed before.

``expiry_stores`` is the chain's last step: every registered adapter with lifecycle capabilities
(``stores.adapters.lifecycle``) expires, settles supersessions and evicts by the platform's memory caps, each
change through its store's gate; it returns counts per store and pass, heartbeating as it goes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from temporalio import activity

from activities.support import PlatformActivities, beat, count, keep_sensitive
from stores.adapters.lifecycle import lifecycle_pass
from stores.forgetting.requests import FINAL, ForgetPayload
from stores.infra.errors import CiphertextInvalid, DataKeyShredded, InvalidIdentifier, RequestNotFound
from stores.lifecycle.retention_expiry import MAX_GENERATIONS, ExpiredItem, expiry_request_id, grouped, still_expired
from stores.privacy.identity import subject_of_stored
from workflows.contracts.expiry import (
    ExpiryActivityNames,
    ExpiryFiled,
    ExpiryFileInput,
    ExpiryGroup,
    ExpiryPage,
    ExpiryPageInput,
    ExpiryStoresDone,
    ExpiryStoresInput,
)

log = structlog.get_logger("activities.expiry")
#: the rows' own words sealed as recall probes, at most this many per request (verification stays bounded)
MAX_PROBES = 20
REQUESTED_BY = "schedule:expiry-sweep"


class ExpiryActivities(PlatformActivities):
    @activity.defn(name=ExpiryActivityNames.PAGE)
    def expiry_page(self, inp: ExpiryPageInput) -> ExpiryPage:
        after = (datetime.fromisoformat(inp.after_expires_at), inp.after_id) if inp.after_expires_at else None
        rows = self.platform.memory_states.expired(datetime.fromisoformat(inp.now), inp.limit, after=after)
        if not rows:
            return ExpiryPage(last_expires_at=inp.after_expires_at, last_id=inp.after_id)
        groups = [ExpiryGroup(sk, app, ids) for sk, app, ids in grouped(rows)]
        return ExpiryPage(groups, len(rows), rows[-1].expires_at.isoformat(), rows[-1].id)

    @activity.defn(name=ExpiryActivityNames.FILE)
    def expiry_file(self, inp: ExpiryFileInput) -> ExpiryFiled:
        sk, app = inp.subject_key, inp.app_name
        if self.platform.requests.active_hold(sk) is not None:
            return ExpiryFiled("skipped_held")  # a hold always wins: nothing is deleted, the next run looks again
        if self.platform.ledger.user_fenced(sk):
            return ExpiryFiled("skipped_fenced")  # a running erasure removes these rows itself
        beat(stage="rows")
        items = self._own(sk, app, still_expired(self.platform.pool, sk, app, inp.memory_ids, self._now(inp)))
        if not items:
            return ExpiryFiled("gone")
        ids = [i.id for i in items]
        store = self.platform.forget_requests
        for generation in range(MAX_GENERATIONS):
            request_id = expiry_request_id(sk, app, ids, generation)
            try:
                row = store.get(request_id)
            except RequestNotFound:
                beat(stage="file", generation=generation)
                payload = ForgetPayload(items[0].user_id, probes=self._probes(items))
                row = store.create(
                    sk,
                    app,
                    "forget",
                    ids,
                    payload,
                    requested_by=REQUESTED_BY,
                    request_id=request_id,
                    reason="retention_expiry",
                )
                count("memory_expiry_forgets_filed", "forget requests filed by the retention-expiry sweep")
                log.info("expiry_forget_filed", subject_key=sk, request_id=request_id, items=len(ids))
            self.platform.approvals.record(  # the retention policy decided: the forget runs through the gate
                request_id=row.request_id,
                subject_key=sk,
                kind="forget",
                path="retention_policy",
                decision="approved",
                requested_by=REQUESTED_BY,
                decided_by=REQUESTED_BY,
            )
            if row.state not in FINAL:
                return ExpiryFiled("filed" if row.state == "received" else "running", request_id, row.memory_ids)
            # an earlier forget of these very rows ended without removing them (held, failed): a new one
        log.warning("expiry_generations_exhausted", subject_key=sk, items=len(ids))
        return ExpiryFiled("failed")

    @activity.defn(name=ExpiryActivityNames.STORES)
    def expiry_stores(self, inp: ExpiryStoresInput) -> ExpiryStoresDone:
        platform = self.platform
        done = lifecycle_pass(
            platform.adapters.in_order(),
            platform.config.memory_caps,
            datetime.fromisoformat(inp.now),
            activity.heartbeat,
        )
        stores = {
            store: {**{n: d.changed for n, d in passes.items()}, **{f"{n}_held": d.held for n, d in passes.items()}}
            for store, passes in done.stores.items()
        }
        for name in ("expired", "superseded", "evicted"):
            count(f"store_lifecycle_{name}", f"items {name} by the stores' lifecycle passes", done.total(name))
        log.info("store_lifecycle_done", stores=stores)
        return ExpiryStoresDone(
            done.total("expired"), done.total("superseded"), done.total("evicted"), done.held, stores
        )

    @staticmethod
    def _now(inp: ExpiryFileInput) -> datetime:
        return datetime.fromisoformat(inp.now)

    def _own(self, subject_key: str, app_name: str, items: list[ExpiredItem]) -> list[ExpiredItem]:
        """The rows whose recorded user id is the subject's (a row filed under a wrong key is left alone)."""
        secret = self.platform.config.subject_secret

        def is_own(item: ExpiredItem) -> bool:
            try:
                return subject_of_stored(secret, app_name, item.user_id) == subject_key
            except InvalidIdentifier:
                return False

        own = [i for i in items if is_own(i)]
        keep_sensitive(*{i.user_id for i in own})
        if len(own) < len(items):
            log.warning("expiry_rows_of_another_key_kept", subject_key=subject_key, rows=len(items) - len(own))
        return own

    def _probes(self, items: list[ExpiredItem]) -> list[str]:
        texts: list[str] = []
        for item in items[:MAX_PROBES]:
            try:
                texts.append(self.platform.memory_store.decrypt_row(uuid.UUID(item.id), item.sealed))
            except (DataKeyShredded, CiphertextInvalid):  # unreadable for good: nothing to probe for
                continue  # (a KMS or database error is raised: the filing is retried, never sealed without probes)
        keep_sensitive(*texts)
        return texts

    def activities(self) -> list[Callable[..., Any]]:
        return [self.expiry_page, self.expiry_file, self.expiry_stores]

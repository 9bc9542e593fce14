"""Request lifecycle activities: begin (canaries and a ciphertext sample), holds, state, finish."""

from __future__ import annotations

import base64
import contextvars
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from temporalio import activity

from activities.support import PlatformActivities, count, non_retryable
from stores.adapters.interface import StartCapture
from stores.adapters.registry import AdapterRegistry
from stores.books.request_record import CiphertextSample
from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.ledgers import tombstone_journal as journal
from stores.memory.verbatim_copies import runs_of
from stores.operations.presence import flattened, presence_by_store, unplanned_stores
from stores.privacy.embedding import tokens
from stores.privacy.identity import session_ref, token_digest
from stores.privacy.redaction import sensitive
from stores.sessions.sealing import RowSealer
from workflows.contracts import error_types
from workflows.contracts.erasure import (
    Activities,
    BeginResult,
    DueChange,
    FinishInput,
    HoldStatus,
    PlanStep,
    StateChange,
    StepInput,
)

T = TypeVar("T")
log = structlog.get_logger("activities.request")
CANARY_COUNT = 5
_COMMON = frozenset(
    [
        "about",
        "after",
        "again",
        "appointment",
        "because",
        "before",
        "billing",
        "could",
        "delivery",
        "please",
        "refund",
        "reference",
        "remember",
        "should",
        "still",
        "their",
        "there",
        "these",
        "thanks",
        "which",
        "would",
        "address",
        "account",
    ]
)


def _event_texts(platform: Any, app_name: str, user_id: str, limit: int = 200) -> list[str]:
    """Texts of the user's events (sealed under the user's data key: opened here; one that does not open,
    its key gone, holds nothing readable to take canaries from)."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT user_id, session_id, id, event_data FROM events WHERE app_name = %s AND user_id = ANY(%s) LIMIT %s",
            (app_name, platform.sessions.stored_ids(app_name, user_id), limit),
        ).fetchall()
    opener = RowSealer(platform.keys, platform.config.subject_secret)
    texts: list[str] = []
    for filed, session_id, event_id, stored in rows:
        try:
            data = opener.open_event(app_name, filed, session_id, event_id, stored) if stored else {}
        except (DataKeyShredded, CiphertextInvalid):
            continue
        for part in (data.get("content") or {}).get("parts") or []:
            if isinstance(part, dict) and part.get("text"):
                texts.append(str(part["text"]))
    return texts


@dataclass(frozen=True)
class UserText:
    memories: list[str]
    events: list[str]
    derived: list[uuid.UUID]


def worker_plan(registry: AdapterRegistry) -> list[PlanStep]:
    """The plan of this process's registry: every configured store, in the order their ``after`` asks.

    Not the physical clean-up stores (``after_sweep``: vacuum, compaction): the erasure and its receipt do
    not wait for them; the platform's scheduled physical job covers the finished request and signs its
    physical attestation (issue 30, ``workflows/physical.py``). Plans recorded before keep them."""
    return [PlanStep(p.name, list(p.after), p.batched, p.after_sweep) for p in registry.plan if not p.after_sweep]


class RequestActivities(PlatformActivities):
    @activity.defn(name=Activities.BEGIN)
    def begin_request(self, inp: StepInput) -> BeginResult:
        """Mark the request running; decide, record and return the plan (this worker's registry); capture
        canary digests and a ciphertext sample (once)."""
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        user_id = subject.raw_user_id()
        now = datetime.now(UTC)
        requests = self.platform.requests
        requests.set_state(inp.request_id, "running", now)
        record = requests.record(inp.request_id)
        # the plan is decided here, once: this worker's registry, recorded with the request (the verifier, the
        # receipt and re-verification read it back) and returned for the saga to act on
        plan = worker_plan(self.platform.adapters)
        if record.stores != [p.name for p in plan]:
            requests.merge_record(inp.request_id, stores=[p.name for p in plan])
            record = requests.record(inp.request_id)
        sessions = len(self.platform.sessions.session_ids(subject.app_name, user_id))
        if record.canaries is not None:  # a retry after success: keep what was captured first
            return BeginResult(now.isoformat(), sessions, len(record.canaries), plan)
        adapters = self.platform.adapters.in_order()
        # the captures are independent reads: side by side, each in a copy of the activity's context (the
        # canaries and the text runs wait for the user's text); the plan check is judged first, on the
        # stores' presence alone, so a refusal says why whatever the other reads meet, and nothing is written
        # before it
        with sensitive(user_id), ThreadPoolExecutor(4, thread_name_prefix="begin") as reads:

            def read(fn: Callable[..., T], *args: Any) -> Future[T]:
                return reads.submit(contextvars.copy_context().run, fn, *args)

            presence_at = read(presence_by_store, self.platform, subject.app_name, user_id, subject.subject_key)
            seen_at = read(self._user_text, subject.subject_key, subject.app_name, user_id)  # once, for both
            captured_at = read(lambda: {a.name: a.capture(subject) for a in adapters if isinstance(a, StartCapture)})
            sample_at = read(self.platform.memory.sample_sealed, subject.subject_key)
            by_store = presence_at.result()
            missing = unplanned_stores(by_store, record.stores) if record.stores is not None else []
            if missing:  # decided where the work is done: this worker's registry, not the filer's
                requests.merge_record(inp.request_id, found_at_start=flattened(by_store))
                raise non_retryable(
                    f"stores holding the subject's data are not in the request's plan: {', '.join(missing)} "
                    "(the plan was chosen by a process configured without them); nothing was erased",
                    error_types.PLAN_INCOMPLETE,
                )
            found = flattened(by_store)
            seen = seen_at.result()
            canaries_at = read(self._canaries, subject.subject_key, subject.app_name, user_id, seen)
            runs, copies = self._text_runs(subject.subject_key, seen)
            canaries, captured, sample = canaries_at.result(), captured_at.result(), sample_at.result()
        if not any(found.values()):
            log.warning("subject_not_found", subject_key=subject.subject_key, request_id=inp.request_id)
        requests.merge_record(
            inp.request_id,
            canaries=canaries,
            ciphertext_sample=CiphertextSample(sample[0], base64.b64encode(sample[1]).decode()) if sample else None,
            sessions_at_start=sessions,
            found_at_start=found,
            text_runs=runs,
            copies_at_start=copies,
            refs_at_start=captured,
        )
        return BeginResult(now.isoformat(), sessions, len(canaries), plan)

    def _user_text(self, subject_key: str, app_name: str, user_id: str) -> UserText:
        """What the captures read of the user: a bounded sample of their memories' and events' texts, and the rows
        derived from their rows or sessions (those go with the erasure: they make no word common, no copy)."""
        refs = [session_ref(subject_key, s) for s in self.platform.sessions.session_ids(app_name, user_id)]
        return UserText(
            self.platform.memory.user_texts(subject_key, self.platform.memory_store),
            _event_texts(self.platform, app_name, user_id),
            self.platform.memory.derived_ids(subject_key, refs),
        )

    def _text_runs(self, subject_key: str, seen: UserText) -> tuple[list[list[str]], list[str]]:
        """Runs of the user's words (keyed digests) and the rows of other subjects already holding one: copies
        made before the request, which the erasure keeps and the receipt discloses (counts only)."""
        memory, store = self.platform.memory, self.platform.memory_store
        found = runs_of(self.platform.config.subject_secret, [*seen.memories, *seen.events])
        runs, holders = memory.distinctive_runs_and_holders(found, subject_key, store, seen.derived)
        return runs, sorted(str(c) for c in holders)

    def _canaries(self, subject_key: str, app_name: str, user_id: str, seen: UserText | None = None) -> list[str]:
        """Keyed digests of distinctive words found in the user's memories and events and nobody else's."""
        seen = seen or self._user_text(subject_key, app_name, user_id)
        counts: dict[str, int] = {}
        for text in [*seen.memories, *seen.events]:
            for tok in set(tokens(text)):
                counts[tok] = counts.get(tok, 0) + 1
        candidates = sorted(
            (t for t in counts if len(t) >= 7 and t.isalpha() and t not in _COMMON and t not in user_id.lower()),
            key=lambda t: (-len(t), counts[t], t),
        )
        secret = self.platform.config.subject_secret
        digests = [token_digest(secret, tok) for tok in candidates[:50]]
        # a word the platform already copied into a summary drawing on the user's rows or sessions is
        # still the user's: those summaries go with the erasure, so they do not make the word common
        return self.platform.memory.unheld_digests(digests, subject_key, seen.derived)[:CANARY_COUNT]

    @activity.defn(name=Activities.HOLD_ACTIVE)
    def hold_active(self, inp: StepInput) -> HoldStatus:
        return HoldStatus(on_hold=self.platform.requests.active_hold(inp.subject_key) is not None)

    @activity.defn(name=Activities.SET_STATE)
    def set_request_state(self, inp: StateChange) -> None:
        at = datetime.fromisoformat(inp.at) if inp.at else datetime.now(UTC)
        self.platform.requests.set_state(inp.request_id, inp.state, at)
        if inp.state in ("denied", "cancelled"):  # never run: the raw user id and contact are not kept
            self.platform.requests.forget_user_id(inp.request_id)
            self.platform.requests.forget_contact(inp.request_id)

    @activity.defn(name=Activities.SET_DUE)
    def set_request_due(self, inp: DueChange) -> None:
        self.platform.requests.set_due(inp.request_id, datetime.fromisoformat(inp.due_at))

    @activity.defn(name=Activities.FINISH)
    def finish_request(self, inp: FinishInput) -> None:
        """Final state, erasure ledger entry, and the raw user id forgotten (idempotent)."""
        completed = datetime.fromisoformat(inp.completed_at)
        requests = self.platform.requests
        record = requests.record(inp.request_id)
        found = record.found_at_start
        state = inp.status
        if state == "completed" and found is not None and not any(found.values()):
            state = "nothing_found"  # said in words: the platform held nothing for this id, nothing was erased
        requests.set_state(inp.request_id, state, completed)
        if inp.status != "completed":  # the subject's notice is sent for a completed erasure only
            requests.forget_contact(inp.request_id)
        if inp.status != "failed":
            shredded = record.keys_shredded_at
            self.platform.ledger.record_erasure(
                inp.request_id,
                inp.subject_key,
                inp.app_name,
                completed,
                datetime.fromisoformat(shredded) if shredded else None,
            )
            journal.write(
                self.platform.s3,
                self.platform.config.receipt_bucket,
                journal.JournalEntry(
                    request_id=inp.request_id,
                    subject_key=inp.subject_key,
                    app_name=inp.app_name,
                    erased_at=completed.isoformat(),
                    keys_shredded_at=shredded,
                    sealed_sessions=[
                        base64.b64encode(b).decode() for b in self.platform.ledger.sealed_sessions_of(inp.subject_key)
                    ],
                ),
            )
        if inp.status == "failed" and inp.failed_step:  # what a failure left behind, for `erasure status`
            requests.merge_record(inp.request_id, failed_step=inp.failed_step, fence_after_failure=inp.fence or None)
        # needed only while the request ran (the final verification is done): destroyed, not just flagged
        requests.merge_record(
            inp.request_id,
            ciphertext_sample=None,
            ciphertext_sample_destroyed=True,
            canaries=None,
            canaries_destroyed=True,
            text_runs=None,
        )
        self.platform.logs.forget_tally(inp.request_id)
        if requests.forget_user_id(inp.request_id) or inp.status == "failed":
            count("erasure_requests_finished", "erasure requests by final status", status=inp.status)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.begin_request, self.hold_active, self.set_request_state, self.set_request_due, self.finish_request]

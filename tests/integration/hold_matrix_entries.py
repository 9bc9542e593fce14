"""The hold matrix's entry points (``tests/integration/test_hold_matrix.py``): one table, one row per path.

Each row names how to run one destructive path for real (its activity, its store method or its job, called
the way the worker, the memory service or the scheduled job calls it) on a ``Target``, what that path needs
prepared first (``prepare``: the subject's rows it acts on, written before anything is fingerprinted), the
roles a held owner's data can play for it (``ROLES``: the subject itself; the owner of a summary drawn from
the subject's rows, where the path follows provenance to rows derived from the subject's) and how to see
that it did its work on an unheld control (``observe``, the control's fingerprint in every registered store
unless the path says otherwise). A runner returns what the path's own result counts as held (rows, groups,
steps, a refusal): a hold that keeps data must be said, not only honoured.

Paths that may go ahead under a hold say so (``holds=False``): a suppression deletes nothing (the design lets
it go ahead, the data stays byte-identical), and the physical job changes no live row (it vacuums and
compacts what was deleted before; it reads no hold). Paths that write a row of the owner as part of what they
do (a correction, a contradiction, a re-statement) say ``writes=True``: the owner's new row is theirs to
write, and every row they held before must stay byte-identical.

Paths that act on every registered store through its adapter say how far they reach (``reach``): all the
subject's data there (``"subject"``: the erase step, both sweeps, the restore replay) or the copies of the
target's items there (``"items"``: forgetting). The matrix runs those over a platform with more stores (a store
added as a package, the Qdrant store): the stores' data comes from their own ``seed`` hooks (``Seeded``, what
the seeders call) and, for the items a forget covers, from ``copy_items`` (``CopiesItems``, test support beside
``fingerprint``: what the platform's writer does when it keeps a copy of memory items in the store).

Decay changes no row by itself: a row's confidence is computed when it is read (``DECAYED_SQL``). The one
change to a row's decay is a re-statement that resets it (``reinforced_at``, ``confidence``), so the decay
row ages the subject's row into the review band and has the words written again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from psycopg.types.json import Jsonb
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.expiry import ExpiryActivities
from activities.forget import ForgetActivities
from activities.late_sweep import LateSweepActivities
from activities.store_steps import StoreStepActivities
from stores.adapters.common import digest
from stores.adapters.interface import Subject
from stores.forgetting.requests import ForgetPayload
from stores.ledgers.forget_tombstones import STRENGTHS
from stores.ledgers.lifecycle_journal import EVENTS, LifecycleEntry
from stores.ledgers.tombstone_journal import JournalEntry
from stores.memory.lifecycle_rules import Caps
from stores.memory.store import NewMemory
from stores.memory.upkeep import MemoryUpkeep
from stores.operations.lifecycle_replay import WITH_DERIVED
from stores.operations.lifecycle_replay import replay_entry as replay_lifecycle_entry
from stores.operations.restore import replay_entry
from stores.operations.session_retirement import retire_idle_sessions
from stores.physical.evidence import table_stats
from stores.physical.vacuum import tables_of
from stores.platform import Platform
from stores.sessions.reseal import AdkResealer
from tests.saga_harness import SagaHarness
from verifier.receipts.attestation import file_physical
from workers.local_secrets import load_secrets
from workflows.contracts import error_types
from workflows.contracts.erasure import StoreStepInput, SweepStoresInput, SweepSubjectInput
from workflows.contracts.expiry import ExpiryFileInput
from workflows.contracts.forget import ForgetStep

Role = Literal["subject", "derived owner"]
#: how far a path reaches into each registered store: everything of the subject's, or the target items' copies
Reach = Literal["subject", "items"]
#: the held user is the one the path acts on; or the owner of a summary drawn from that subject's rows
ROLES: tuple[Role, ...] = ("subject", "derived owner")
SUBJECT_ONLY: tuple[Role, ...] = ("subject",)

#: a fact the lifecycle rows act on (its words, and the metadata a re-statement must repeat to match it)
WORDS = "I keep the boarding passes in the blue folder"
META: dict[str, object] = {"purpose": "trip_planning", "retention": "preference", "kind": "fact"}


@dataclass(frozen=True)
class Target:
    """What one run acts on: the subject (request id, subject key, app, raw user id) and its prepared rows."""

    subject: Subject
    memory_ids: list[str] = field(default_factory=list)
    session_id: str | None = None


Run = Callable[[SagaHarness, Target], Awaitable[int]]
Prepare = Callable[[Platform, Subject], Target]
Observe = Callable[[SagaHarness, Target], Awaitable[object]]


def fingerprints(platform: Platform, app: str, user: str) -> dict[str, Any]:
    """Every registered store's fingerprint of the user (the stores the matrix is generated from)."""
    return {name: platform.adapters.get(name).fingerprint(app, user) for name in platform.adapters.names}


@runtime_checkable
class CopiesItems(Protocol):
    """Test support an adapter may offer beside ``fingerprint``: write a copy of each of the user's memory items
    (id -> text) into its store, as the platform's writer does when it keeps one (under the item's id)."""

    def copy_items(self, app_name: str, user_id: str, items: Mapping[str, str]) -> int: ...


def copy_target_items(platform: Platform, target: Target) -> list[str]:
    """A copy of the target's items in every registered store that takes one (``CopiesItems``): their names."""
    subject, store = target.subject, platform.memory_store
    items = {i: text for i in target.memory_ids for text in store.texts_of(subject.subject_key, [i])}
    assert items, "the target's items are not readable"
    took = []
    for adapter in platform.adapters.in_order():
        if isinstance(adapter, CopiesItems):
            adapter.copy_items(subject.app_name, subject.raw_user_id(), items)
            took.append(adapter.name)
    return took


# ----- prepare: the rows a path acts on, written before anything is fingerprinted ----------------------------


def just_the_subject(_platform: Platform, subject: Subject) -> Target:
    return Target(subject)


def own_rows(platform: Platform, subject: Subject) -> Target:
    """Two of the subject's own seeded rows (episodes or facts: a summary is another row's copy)."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id FROM memories WHERE subject_key = %s AND kind <> 'summary' ORDER BY id LIMIT 2",
            (subject.subject_key,),
        ).fetchall()
    assert len(rows) == 2, "the seeded subject has fewer than two rows"
    return Target(subject, [str(r[0]) for r in rows])


def one_session(platform: Platform, subject: Subject) -> Target:
    """One of the subject's seeded sessions, with the rows ingested from it."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, session_id FROM memories WHERE subject_key = %s AND kind <> 'summary' "
            "AND session_id = (SELECT min(session_id) FROM memories WHERE subject_key = %s) ORDER BY id",
            (subject.subject_key, subject.subject_key),
        ).fetchall()
    assert rows, "the seeded subject has no session rows"
    return Target(subject, [str(r[0]) for r in rows], session_id=str(rows[0][1]))


def a_plain_state(platform: Platform, subject: Subject) -> Target:
    """The subject's user state as a row the plain google-adk writer left before sealing (what re-seal seals)."""
    with platform.pool.connection() as conn:
        conn.execute(
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now()) "
            "ON CONFLICT (app_name, user_id) DO UPDATE SET state = EXCLUDED.state",
            (subject.app_name, subject.subject_key, Jsonb({"lang": "pt", "plain": True})),
        )
    return Target(subject)


def _fact(
    platform: Platform, subject: Subject, retention: str = str(META["retention"]), created_at: datetime | None = None
) -> Target:
    row = NewMemory(
        subject.app_name,
        subject.raw_user_id(),
        WORDS,
        kind=str(META["kind"]),
        purpose=str(META["purpose"]),
        retention_class=retention,
        created_at=created_at,
    )
    platform.memory_store.insert([row])
    return Target(subject, [str(row.id)])


def a_fact(platform: Platform, subject: Subject) -> Target:
    """A live fact of the subject's, written now."""
    return _fact(platform, subject)


def a_decayed_fact(platform: Platform, subject: Subject) -> Target:
    """A fact stated 400 days ago and never reinforced: decayed into the review band (never recalled)."""
    return _fact(platform, subject, created_at=datetime.now(UTC) - timedelta(days=400))


def an_expired_fact(platform: Platform, subject: Subject) -> Target:
    """A row captured two days ago for the working context (a day's retention): past its retention."""
    return _fact(platform, subject, "working_context", datetime.now(UTC) - timedelta(days=2))


# ----- observe: what a path changes of an unheld control -----------------------------------------------------


async def every_store(h: SagaHarness, target: Target) -> object:
    return await asyncio.to_thread(fingerprints, h.platform, target.subject.app_name, target.subject.raw_user_id())


async def target_rows(h: SagaHarness, target: Target) -> object:
    """The target rows as stored, byte for byte (a writing path's own new row is not what it changed)."""
    with h.platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT * FROM memories WHERE id = ANY(%s::uuid[]) ORDER BY id", (target.memory_ids,)
        ).fetchall()
    return [digest(r) for r in rows]


async def recalled(h: SagaHarness, target: Target) -> object:
    """Which target rows the recall path returns when asked for their own words (what a suppression hides)."""
    platform, subject = h.platform, target.subject
    found: set[str] = set()
    for text in platform.memory_store.texts_of(subject.subject_key, target.memory_ids):
        answer = await platform.memory_service.search_memory(
            app_name=subject.app_name, user_id=subject.raw_user_id(), query=text
        )
        found |= {m.id or "" for m in answer.memories} & set(target.memory_ids)
    return sorted(found)


async def vacuums(h: SagaHarness, _target: Target) -> object:
    """Postgres's own count of vacuums of every table a registered store names (the physical job's pass)."""
    tables = sorted({t for a in h.platform.adapters.in_order() for t in tables_of(a)})
    with h.platform.pool.connection() as conn:
        return {t: s.vacuums for t, s in table_stats(conn, tables).items()}


# ----- run: the paths, each returning what its own result counts as held ------------------------------------


def _env() -> ActivityEnvironment:
    return ActivityEnvironment()


async def erase_steps(h: SagaHarness, target: Target) -> int:
    """The saga's erase step of every store in the plan: every step held (the subject's hold), or the derived
    rows the steps kept for their held owners."""
    platform, subject = h.platform, target.subject
    steps, results = StoreStepActivities(platform), []
    for name in [p.name for p in platform.adapters.plan]:
        inp = StoreStepInput(subject.request_id, subject.subject_key, subject.app_name, name)
        results.append(await asyncio.to_thread(_env().run, steps.erase_store_unless_held, inp))
    if all(r.held for r in results):
        return len(results)
    return sum(r.counts.get("derived_rows_held", 0) for r in results)


async def second_sweep(h: SagaHarness, target: Target) -> int:
    platform, subject = h.platform, target.subject
    steps = StoreStepActivities(platform)
    plan = [p.name for p in platform.adapters.plan]
    inp = SweepStoresInput(subject.request_id, subject.subject_key, subject.app_name, plan)
    swept = await asyncio.to_thread(_env().run, steps.sweep_stores_unless_held, inp)
    return int(swept.held) + swept.counts.get("derived_rows_held", 0)


async def scheduled_sweep(h: SagaHarness, target: Target) -> int:
    """The scheduled late-writer sweep of a subject erased (by the ledger) after every row seeded."""
    platform, subject = h.platform, target.subject
    later = datetime.now(UTC) + timedelta(minutes=5)
    platform.ledger.record_erasure(subject.request_id, subject.subject_key, subject.app_name, later, later)
    sweep = LateSweepActivities(platform)
    found = await asyncio.to_thread(_env().run, sweep.sweep_subject, SweepSubjectInput(subject.request_id))
    return int(found.held) + found.reported.get("derived_rows_held", 0)


async def restore_replay(h: SagaHarness, target: Target) -> int:
    """``erasure replay-tombstones`` for one journal entry: a subject erased (by the journal) after every row
    seeded, as a restored backup brings them back."""
    subject = target.subject
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    entry = JournalEntry(subject.request_id, subject.subject_key, subject.app_name, later, later)
    counts = await asyncio.to_thread(replay_entry, h.platform, entry)
    return counts.get("subjects_held", 0) + counts.get("derived_rows_held", 0)


async def idle_retirement(h: SagaHarness, target: Target) -> int:
    """Idle-session retirement of the app (every session idle for more than a millisecond)."""
    counts = await retire_idle_sessions(h.platform, target.subject.app_name, timedelta(milliseconds=1))
    return counts.held


async def _apply_forget(h: SagaHarness, request_id: str, target: Target, strength: str) -> int:
    """The forget's ``apply`` activity (the step that changes data): a refusal for a hold counts one."""
    subject = target.subject
    forget = ForgetActivities(h.platform, load_secrets(h.settings).signing_key)
    step = ForgetStep(request_id, subject.subject_key, subject.app_name, strength)
    try:
        applied = await asyncio.to_thread(_env().run, forget.forget_apply, step)
    except ApplicationError as refused:
        if refused.type == error_types.LEGAL_HOLD:
            return 1
        raise
    return applied.counts.get("held", 0)


def forget_at(strength: str) -> Run:
    """A forget of the target's rows (or its session) at ``strength``, filed as the CLI files one (without the
    filing's own early refusal of a held subject: the step that changes data is the one under test)."""

    async def run(h: SagaHarness, target: Target) -> int:
        subject = target.subject
        payload = ForgetPayload(subject.raw_user_id(), session_id=target.session_id)
        ids = [] if strength == "erase_session" else target.memory_ids
        row = await asyncio.to_thread(
            h.platform.forget_requests.create, subject.subject_key, subject.app_name, strength, ids, payload
        )
        return await _apply_forget(h, row.request_id, target, strength)

    return run


async def expiry(h: SagaHarness, target: Target) -> int:
    """The expiry sweep's filing of the target group, then the forget it files (a held group is skipped)."""
    subject = target.subject
    group = ExpiryFileInput(subject.subject_key, subject.app_name, target.memory_ids, datetime.now(UTC).isoformat())
    filed = await asyncio.to_thread(_env().run, ExpiryActivities(h.platform).expiry_file, group)
    if filed.outcome == "skipped_held":
        return 1
    assert filed.outcome == "filed", filed
    return await _apply_forget(h, filed.request_id, target, "forget")


async def eviction(h: SagaHarness, target: Target) -> int:
    """Capacity eviction as the platform's memory upkeep runs it after a write, with a cap of one row."""
    platform, subject = h.platform, target.subject
    upkeep = MemoryUpkeep(
        platform.memory_store,
        platform.memory_states,
        Caps(max_records=1),
        platform.lifecycle_journal,
        held=lambda sk: platform.requests.active_hold(sk) is not None,
    )
    await asyncio.to_thread(upkeep.enforce, subject.subject_key, subject.app_name)
    return upkeep.counts["held"]


#: stands for the target's row ids in a write's metadata (``supersedes``, ``contradicts``)
TARGET = object()


def _write(text: str, **meta: object) -> Run:
    """The agent writing one memory through the platform's fenced memory service (its upkeep runs after the
    write: supersession, contradiction, reinforcement, caps); what the upkeep counts as held meanwhile."""

    async def run(h: SagaHarness, target: Target) -> int:
        service, subject = h.platform.memory_service, target.subject
        assert service.upkeep is not None
        entry = MemoryEntry(
            content=types.Content(role="user", parts=[types.Part(text=text)]),
            custom_metadata={k: (target.memory_ids if v is TARGET else v) for k, v in meta.items()},
        )
        held = service.upkeep.counts["held"]
        await service.add_memory(
            app_name=subject.app_name, user_id=subject.raw_user_id(), memories=[entry], custom_metadata=META
        )
        return service.upkeep.counts["held"] - held

    return run


def lifecycle_replay(event: str) -> Run:
    """``erasure replay-tombstones``' lifecycle half for one journal entry of ``event`` naming the target rows
    (a restored backup from before the transition brings them back)."""

    async def run(h: SagaHarness, target: Target) -> int:
        subject = target.subject
        entry = LifecycleEntry(event, subject.subject_key, subject.app_name, target.memory_ids)
        counts = await asyncio.to_thread(replay_lifecycle_entry, h.platform, entry)
        return counts["lifecycle_rows_held"]

    return run


async def reseal(h: SagaHarness, target: Target) -> int:
    """``erasure reseal-sessions``' page over the cell's app (its two users' user states: the cell's own app
    sorts them first); a held owner's plain row is left as it is and counted."""
    resealer = AdkResealer(h.platform.pool, h.platform.keys, h.platform.config.subject_secret)
    page = await asyncio.to_thread(resealer.page, "user_states", (target.subject.app_name, ""), 2)
    return page.held


async def physical_job(h: SagaHarness, target: Target) -> int:
    """The platform's physical clean-up job run for the subject's request (filed as a finished erasure is):
    vacuum, compaction, the keys table's rewrite. It reads no hold: it changes no live row."""
    request_id = target.subject.request_id
    file_physical(h.platform.pool, request_id, "erasure", h.platform.config.physical_window)
    await h.physical([request_id])
    return 0


# ----- the table --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryPoint:
    """One destructive path: how to run it, what it acts on, which roles of a held owner it can reach."""

    run: Run
    prepare: Prepare = just_the_subject
    roles: tuple[Role, ...] = SUBJECT_ONLY
    holds: bool = True  # its result counts what a hold kept (False: it may go ahead, changing nothing held)
    writes: bool = False  # it writes a row of the owner: only the rows held before must stay byte-identical
    observe: Observe = every_store
    reach: Reach | None = None  # it acts on every registered store through its adapter (see the module)


def forget_entry(strength: str) -> EntryPoint:
    """A forget at ``strength``: a suppression deletes nothing and may go ahead under a hold (it hides the
    subject's items from recall: what it changes); a session erasure acts on one session's rows."""
    if strength == "suppress":
        return EntryPoint(forget_at(strength), own_rows, holds=False, observe=recalled, reach="items")
    prepare = one_session if strength == "erase_session" else own_rows
    return EntryPoint(forget_at(strength), prepare, ROLES, reach="items")


ENTRY_POINTS: dict[str, EntryPoint] = {
    "erase step": EntryPoint(erase_steps, own_rows, ROLES, reach="subject"),
    "second sweep": EntryPoint(second_sweep, own_rows, ROLES, reach="subject"),
    "scheduled sweep": EntryPoint(scheduled_sweep, own_rows, ROLES, reach="subject"),
    "restore replay": EntryPoint(restore_replay, own_rows, ROLES, reach="subject"),
    "idle-session retirement": EntryPoint(idle_retirement),
    **{f"forget: {strength}": forget_entry(strength) for strength in STRENGTHS},
    "expiry": EntryPoint(expiry, an_expired_fact, ROLES),
    "eviction": EntryPoint(eviction),  # the subject's rows only: rows derived from an evicted row stay
    "decay": EntryPoint(_write(WORDS), a_decayed_fact, writes=True, observe=target_rows),
    "reinforcement": EntryPoint(_write(WORDS), a_fact, writes=True, observe=target_rows),
    "supersession": EntryPoint(
        _write("I keep the boarding passes in the red folder now", supersedes=TARGET),
        a_fact,
        ROLES,
        writes=True,
        observe=target_rows,
    ),
    "contradiction": EntryPoint(  # a contradiction is the subject's: another owner's row is never marked
        _write("I never keep boarding passes in a folder", contradicts=TARGET), a_fact, writes=True, observe=target_rows
    ),
    **{
        f"lifecycle replay: {event}": EntryPoint(
            lifecycle_replay(event), own_rows, ROLES if event in WITH_DERIVED or event == "superseded" else SUBJECT_ONLY
        )
        for event in EVENTS
    },
    "physical job": EntryPoint(physical_job, holds=False, observe=vacuums),
    "re-seal": EntryPoint(reseal, a_plain_state),
}

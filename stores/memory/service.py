"""google-adk ``BaseMemoryService`` over ``stores.memory.store``, and the write fence every runtime uses.

``FencedMemoryService``: while a user tombstone exists, writes for that user are dropped and counted
(never raised into the agent's turn) and searches return nothing; a tombstoned session id is refused
forever, so re-ingesting an old copy of an erased session cannot resurrect it. The tombstone check is
part of each INSERT (``MemoryStore.insert_fenced``), so a fence written between a check and a write
cannot be passed. Rows keep their source event's time as ``created_at``: a replayed queue of writes
from before an erasure stays dated before it, where the date-bounded sweeps look.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.infra.errors import InvalidIdentifier
from stores.ledgers.forget_tombstones import STRENGTHS, ForgetLedger, TombstoneMatcher
from stores.ledgers.tombstones import TombstoneLedger
from stores.memory.capture import REASONS, refusal
from stores.memory.entries import capture_of, content_text, entry_memory
from stores.memory.lifecycle_rules import PRELOAD_THRESHOLD
from stores.memory.search import FoundMemory
from stores.memory.store import FencedWrite, MemoryStore, NewMemory
from stores.memory.upkeep import MemoryUpkeep
from stores.privacy.identity import is_subject_key, session_ref, subject_key, subject_of_stored

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

log = structlog.get_logger("stores.memory.service")
#: the strengths whose tombstones refuse writes (a suppression only hides on read; its item is still held)
WRITE_BLOCKING = ("forget", "erase_session")


def event_time(event: Event) -> datetime | None:
    """When the event happened (ADK ``Event.timestamp``, seconds since the epoch): a row written from a
    replayed queue keeps it, so date-bounded sweeps still see it as written before an erasure."""
    ts = getattr(event, "timestamp", None)
    if isinstance(ts, int | float) and ts > 0:
        return datetime.fromtimestamp(ts, UTC)
    return None


@dataclass(frozen=True)
class SessionCapture:
    """What the platform says about memories it ingests from sessions: why it keeps them, and how long."""

    purpose: str = "conversation_recall"
    retention_class: str = "conversation"


def event_source(author: str | None) -> tuple[str, str]:
    """(source kind, confidence basis) of an event's words: the user's own, or the agent's (an inference)."""
    return ("user", "stated") if author == "user" else ("inference", "inferred")


def session_memories(session: Session, subject_secret: bytes, capture: SessionCapture | None = None) -> list[NewMemory]:
    """Episodes (one per event with text) and facts (sentences stating something about 'my ...'), dated
    by their event, with the platform's purpose and retention for session memories."""
    capture = capture or SessionCapture()
    out: list[NewMemory] = []
    ref = session_ref(subject_of_stored(subject_secret, session.app_name, session.user_id), session.id)
    for event in session.events:
        text = content_text(event.content)
        if not text.strip():
            continue
        episode = NewMemory(
            app_name=session.app_name,
            user_id=session.user_id,
            text=text,
            kind="episode",
            session_id=session.id,
            author=event.author,
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"adk-event:{ref}:{event.id}"),
            source_sessions=[ref],
            created_at=event_time(event),
            purpose=capture.purpose,
            retention_class=capture.retention_class,
            source_kind=event_source(event.author)[0],
            source_ref=f"event:{event.id}",
            confidence_basis=event_source(event.author)[1],
        )
        out.append(episode)
        for n, sentence in enumerate(s.strip() for s in text.split(".")):
            if " my " in f" {sentence.lower()} ":
                out.append(
                    NewMemory(
                        app_name=session.app_name,
                        user_id=session.user_id,
                        text=sentence,
                        kind="fact",
                        session_id=session.id,
                        author="extractor",
                        derived_from=[episode.id],
                        source_sessions=[ref],
                        id=uuid.uuid5(episode.id, f"fact:{n}"),
                        created_at=episode.created_at,
                        purpose=capture.purpose,
                        retention_class=capture.retention_class,
                        source_kind="inference",
                        source_ref=f"extracted:{episode.id}",
                        confidence_basis="inferred",
                    )
                )
    return out


def _entries(found: Sequence[FoundMemory]) -> SearchMemoryResponse:
    return SearchMemoryResponse(
        memories=[
            MemoryEntry(
                id=f.id,
                author=f.author,
                timestamp=f.created_at.isoformat(),
                content=types.Content(role="user", parts=[types.Part(text=f.text)]),
                custom_metadata={"kind": f.kind, "state": f.state, "confidence": round(f.confidence, 3)},
            )
            for f in found
        ]
    )


class PostgresMemoryService(BaseMemoryService):
    """The ADK memory service over ``MemoryStore``; runtimes use it through ``FencedMemoryService``, which
    turns ``fenced`` on: every write then checks the tombstones inside its INSERT (``insert_fenced``)."""

    def __init__(
        self,
        store: MemoryStore,
        subject_secret: bytes,
        *,
        fenced: bool = False,
        capture: SessionCapture | None = None,
    ) -> None:
        self.store = store
        self._secret = subject_secret
        self.fenced = fenced
        self.capture = capture or SessionCapture()
        self.refused_in_insert = 0  # rows the INSERT itself refused (a fence or tombstone written meanwhile)

    async def _write(self, rows: list[NewMemory]) -> FencedWrite:
        if not self.fenced:
            ids = await asyncio.to_thread(self.store.insert, rows)
            return FencedWrite(ids, len(rows) - len(ids))
        written = await asyncio.to_thread(self.store.insert_fenced, rows)
        self.refused_in_insert += written.refused
        return written

    async def write(self, rows: list[NewMemory]) -> FencedWrite:
        return await self._write(rows)

    async def add_session_to_memory(self, session: Session) -> None:
        await self._write(session_memories(session, self._secret, self.capture))

    def event_rows(
        self,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> list[NewMemory]:
        meta = custom_metadata or {}
        return [
            NewMemory(
                app_name=app_name,
                user_id=user_id,
                text=content_text(e.content),
                session_id=session_id,
                author=e.author,
                source_sessions=[session_ref(subject_key(self._secret, app_name, user_id), session_id)]
                if session_id
                else [],
                created_at=event_time(e),
                purpose=str(meta.get("purpose") or self.capture.purpose),
                retention_class=str(meta.get("retention") or self.capture.retention_class),
                source_kind=event_source(e.author)[0],
                source_ref=f"event:{e.id}",
                confidence_basis=event_source(e.author)[1],
            )
            for e in events
            if content_text(e.content).strip()
        ]

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await self._write(self.event_rows(app_name, user_id, events, session_id, custom_metadata))

    def entry_rows(
        self,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> list[NewMemory | str]:
        """One row per entry, or the refusal reason of an entry whose metadata cannot be read."""
        return [entry_memory(app_name, user_id, m, custom_metadata) for m in memories]

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        rows = self.entry_rows(app_name, user_id, memories, custom_metadata)
        await self._write([r for r in rows if isinstance(r, NewMemory)])

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        return _entries(await asyncio.to_thread(self.store.search, app_name, user_id, query))

    async def preload_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """Rows confident enough to be put in front of the model unasked (above the preload threshold), and
        settled: a challenged belief is not preloaded."""
        found = await asyncio.to_thread(self.store.search, app_name, user_id, query, threshold=PRELOAD_THRESHOLD)
        return _entries([f for f in found if f.state == "active"])

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if memory_id:
            await asyncio.to_thread(self.store.delete, app_name, user_id, memory_id)


class FencedMemoryService(BaseMemoryService):
    """The write fence: consult the tombstone ledger before every write and search."""

    def __init__(
        self,
        inner: PostgresMemoryService,
        ledger: TombstoneLedger,
        subject_secret: bytes,
        forgetting: ForgetLedger | None = None,
        upkeep: MemoryUpkeep | None = None,
    ) -> None:
        inner.fenced = True  # the check below answers early and counts; the INSERT's own check is the guarantee
        self.inner = inner
        self._ledger = ledger
        self._forgetting = forgetting
        self._secret = subject_secret
        self.upkeep = upkeep
        self._lock = threading.Lock()
        self.refused: dict[str, int] = {
            "user_fenced": 0,
            "session_tombstoned": 0,
            "invalid_identifier": 0,
            "forgotten": 0,  # rows dropped on write: a live forget tombstone covers them (re-learning)
            # capture refusals (stores.memory.capture): never stored
            **{reason: 0 for reason in REASONS},
        }
        self.hidden_on_read = 0  # search results a live tombstone (suppress or forget) covers
        self.reinforced = 0  # writes that re-observed a row already held (its confidence restored)

    def _matcher(self, app_name: str, user_id: str, strengths: tuple[str, ...]) -> TombstoneMatcher | None:
        sk = self._subject(app_name, user_id)
        if sk is None or self._forgetting is None:
            return None
        found = self._forgetting.matcher(sk, strengths)
        return found if found else None

    def _admitted(self, app_name: str, user_id: str, rows: Sequence[NewMemory | str]) -> list[NewMemory]:
        """The rows the capture checks let through; each refusal counted and logged by reason and subject key
        (no text), never raised into the agent's turn."""
        kept: list[NewMemory] = []
        for row in rows:
            why = row if isinstance(row, str) else refusal(row.text, capture_of(row))
            if why is None and isinstance(row, NewMemory):
                kept.append(row)
            else:
                self._refuse(str(why), app_name, user_id)
        return kept

    async def _unforgotten(self, app_name: str, user_id: str, candidates: Sequence[NewMemory | str]) -> list[NewMemory]:
        """The admitted rows less those a live forget tombstone covers (by id or by a forgotten span): what a
        write keeps. The refusals are counted and logged by subject key only."""
        rows = self._admitted(app_name, user_id, candidates)
        if not rows:
            return []
        matcher = await asyncio.to_thread(self._matcher, app_name, user_id, WRITE_BLOCKING)
        if matcher is not None:
            kept = [r for r in rows if not matcher.covers(str(r.id), r.text)]
            dropped = len(rows) - len(kept)
            if dropped:
                with self._lock:
                    self.refused["forgotten"] += dropped
                log.info("memory_write_forgotten", rows=dropped, subject_key=self._subject(app_name, user_id))
            rows = kept
        return rows

    async def would_ingest_filed_session(self, session: Session) -> list[NewMemory]:
        """The rows ingesting this session would write now (fence, capture checks and forget tombstones
        applied), without writing them: how a forget's verification asks "would it come back?" without
        re-creating what was deleted, ingesting what never was, or running the lifecycle's upkeep."""
        if not await self._check(session.app_name, session.user_id, session.id, filed=True):
            return []
        rows = session_memories(session, self._secret, self.inner.capture)
        return await self._unforgotten(session.app_name, session.user_id, rows)

    async def _write_unforgotten(self, app_name: str, user_id: str, candidates: Sequence[NewMemory | str]) -> None:
        """Write what ``_unforgotten`` keeps; then the lifecycle upkeep (supersession, caps)."""
        rows = await self._unforgotten(app_name, user_id, candidates)
        if not rows:
            return
        written = await self.inner.write(rows)
        if written.reinforced:
            with self._lock:
                self.reinforced += len(written.reinforced)
        sk = self._subject(app_name, user_id)
        if self.upkeep is not None and sk is not None and rows:
            await asyncio.to_thread(self.upkeep.after_write, sk, app_name, rows, written)

    def _subject(self, app_name: str, user_id: str) -> str | None:
        """The subject key, or ``None`` for an id no store can hold (never raised into the agent's turn). A
        subject key given as the user id (a filed session, ``add_filed_session_to_memory``) is itself: the
        public entry points refuse that form before (``_blocked``, ``_readable``)."""
        try:
            return subject_of_stored(self._secret, app_name, user_id)
        except InvalidIdentifier:
            return None

    def _refuse(self, why: str, app_name: str, user_id: str) -> None:
        with self._lock:
            self.refused[why] += 1
        log.info("memory_write_refused", reason=why, subject_key=self._subject(app_name, user_id))

    def _blocked(self, app_name: str, user_id: str, session_id: str | None, filed: bool = False) -> str | None:
        sk = self._subject(app_name, user_id)
        if sk is None or (is_subject_key(user_id) and not filed):  # a caller's id never names a subject key
            return "invalid_identifier"
        if self._ledger.user_fenced(sk):
            return "user_fenced"
        if session_id and self._ledger.session_erased(sk, session_id):
            return "session_tombstoned"
        return None

    async def _check(self, app_name: str, user_id: str, session_id: str | None, filed: bool = False) -> bool:
        why = await asyncio.to_thread(self._blocked, app_name, user_id, session_id, filed)
        if why:
            self._refuse(why, app_name, user_id)
            return False
        return True

    async def add_session_to_memory(self, session: Session) -> None:
        if await self._check(session.app_name, session.user_id, session.id):
            rows = session_memories(session, self._secret, self.inner.capture)
            await self._write_unforgotten(session.app_name, session.user_id, rows)

    async def add_filed_session_to_memory(self, session: Session) -> None:
        """Ingest a session read by the ``user_id`` its rows hold (a subject key, or a raw id google-adk's
        plain service wrote): the idle-session sweeper's, which reads ids from the tables. Same fence."""
        if await self._check(session.app_name, session.user_id, session.id, filed=True):
            rows = session_memories(session, self._secret, self.inner.capture)
            await self._write_unforgotten(session.app_name, session.user_id, rows)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        if await self._check(app_name, user_id, session_id):
            rows = self.inner.event_rows(app_name, user_id, events, session_id, custom_metadata)
            await self._write_unforgotten(app_name, user_id, rows)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        named = sorted({str((m.custom_metadata or {}).get("session_id") or "") for m in memories} - {""})
        sessions: list[str | None] = [*named] if named else [None]
        for sid in sessions:
            if not await self._check(app_name, user_id, sid):
                return
        rows = self.inner.entry_rows(app_name, user_id, memories, custom_metadata)
        await self._write_unforgotten(app_name, user_id, rows)

    async def _recall(self, app_name: str, user_id: str, found: SearchMemoryResponse) -> SearchMemoryResponse:
        matcher = await asyncio.to_thread(self._matcher, app_name, user_id, STRENGTHS)
        if matcher is None:
            return found
        kept = [m for m in found.memories if not matcher.covers(m.id, content_text(m.content))]
        with self._lock:
            self.hidden_on_read += len(found.memories) - len(kept)
        return SearchMemoryResponse(memories=kept)

    async def _readable(self, app_name: str, user_id: str) -> bool:
        sk = None if is_subject_key(user_id) else self._subject(app_name, user_id)
        return sk is not None and not await asyncio.to_thread(self._ledger.user_fenced, sk)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        if not await self._readable(app_name, user_id):
            return SearchMemoryResponse(memories=[])
        found = await self.inner.search_memory(app_name=app_name, user_id=user_id, query=query)
        return await self._recall(app_name, user_id, found)

    async def preload_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """What may be put in front of the model unasked: settled rows above the preload threshold."""
        if not await self._readable(app_name, user_id):
            return SearchMemoryResponse(memories=[])
        found = await self.inner.preload_memory(app_name=app_name, user_id=user_id, query=query)
        return await self._recall(app_name, user_id, found)

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        await self.inner.delete_memory(app_name=app_name, user_id=user_id, memory_id=memory_id)

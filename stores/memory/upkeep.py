"""What the memory service does after a write: supersession, contradiction and capacity eviction.

- A write that ``supersedes`` rows (a correction) marks them superseded, linked to it as their evidence; rows
  derived from them retire with them; cached responses that quote the old belief are removed; the transition
  is journalled (a restore replays it).
- A write that ``contradicts`` rows marks both sides challenged (the subject's own rows only, with the
  subject's rows derived from them): neither is preloaded as settled fact; the correction that supersedes
  one side restores exactly what the contradiction marked.
- Every row about to change goes through ``partition_by_hold`` first: a held owner's rows are kept as they
  are and counted (``counts["held"]``), and so are the rows a duplicate write would have reinforced
  (``FencedWrite.held``: the store writes the observation as its own row instead).
- The per-user caps (records, tokens) are enforced on the live rows: the lowest blended score goes, never a
  pinned row and never a row past its retention (``memory_lifecycle.victims``): the expiry sweep forgets
  those through the forgetting path (tombstone, derived rows, receipt). Nothing is evicted while a legal
  hold is active on the user (the rows that would have gone are counted as held), and the store checks the
  hold again in the deleting transaction. An evicted row is deleted with its embedding; eviction is logged,
  counted and journalled. Eviction is not erasure: it gives no guarantee about copies elsewhere.

Cost: one count by the subject key index per write, and the subject's rows only when a cap is exceeded.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from stores.ledgers.lifecycle_journal import LifecycleEntry, LifecycleJournal
from stores.memory.lifecycle_rules import Caps, victims
from stores.memory.states import MemoryStates
from stores.memory.store import FencedWrite, MemoryStore, NewMemory
from stores.privacy.embedding import tokens

log = structlog.get_logger("stores.memory.upkeep")


class ResponseCache(Protocol):
    """What upkeep needs of the response cache (``stores.response_cache.cache.ResponseCache`` provides it; named
    here so a store does not import another store): drop the entries that quote a forgotten item."""

    def forget_quoting(self, app_name: str, subject: str, quotes: Callable[[str], bool]) -> int: ...


def quotes_words(needles: Sequence[Sequence[str]]) -> Callable[[str], bool]:
    """Whether a text holds any of the word sequences, as consecutive normalised words (never a substring)."""
    wanted = [tuple(n) for n in needles if n]

    def quotes(text: str) -> bool:
        words = tokens(text)
        for needle in wanted:
            size = len(needle)
            if any(tuple(words[i : i + size]) == needle for i in range(len(words) - size + 1)):
                return True
        return False

    return quotes


class MemoryUpkeep:
    def __init__(
        self,
        store: MemoryStore,
        states: MemoryStates,
        caps: Caps,
        journal: LifecycleJournal | None = None,
        cache: Callable[[], ResponseCache | None] | None = None,
        held: Callable[[str], bool] | None = None,
    ) -> None:
        self._store = store
        self._states = states
        self.caps = caps
        self._journal = journal
        self._cache = cache
        self._held = held  # whether a legal hold is active on a subject: a hold preserves, nothing is evicted
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {
            "superseded": 0,
            "challenged": 0,
            "evicted": 0,
            "cached_responses": 0,
            "held": 0,  # rows that would have changed, kept because their owner is under a legal hold
        }

    def _count(self, key: str, n: int) -> None:
        with self._lock:
            self.counts[key] += n

    def after_write(self, subject: str, app_name: str, rows: Sequence[NewMemory], written: FencedWrite) -> None:
        if written.held:  # rows a duplicate would have reinforced, kept as they were: their owner is held
            self._count("held", len(written.held))
            log.info("memory_reinforcement_held", subject_key=subject, rows=len(written.held))
        inserted = set(written.inserted)
        for row in rows:
            if row.id not in inserted:
                continue
            if row.supersedes:
                self.supersede(subject, app_name, [str(i) for i in row.supersedes], str(row.id))
            if row.challenged_by:
                marked = self._states.challenge(subject, [str(i) for i in row.challenged_by], str(row.id))
                self._count("challenged", len(marked.ids))
                self._count("held", len(marked.held))
                log.info("memory_challenged", subject_key=subject, rows=len(marked.ids), held=len(marked.held))
        if inserted or written.reinforced:
            self.enforce(subject, app_name)

    def supersede(self, subject: str, app_name: str, old_ids: Sequence[str], new_id: str) -> list[str]:
        old_texts = self._store.texts_of(subject, old_ids)
        done = self._states.supersede(subject, old_ids, new_id)
        self._count("held", len(done.held_ids))
        if done.held_ids:
            log.info("memory_supersession_held", subject_key=subject, rows=len(done.held_ids))
        if not done.ids:
            return []
        self._count("superseded", len(done.ids))
        if self._journal is not None:
            self._journal.record(
                LifecycleEntry(
                    "superseded",
                    subject,
                    app_name,
                    done.ids,
                    derived_ids=done.derived_ids,
                    superseded_by=new_id,
                    id=str(uuid.uuid5(uuid.UUID(new_id), "superseded")),
                )
            )
        cache = self._cache() if self._cache is not None else None
        if cache is not None and old_texts:
            removed = cache.forget_quoting(app_name, subject, quotes_words([tokens(t) for t in old_texts]))
            self._count("cached_responses", removed)
        log.info("memory_superseded", subject_key=subject, rows=len(done.ids), derived=len(done.derived_ids))
        return done.ids

    def enforce(self, subject: str, app_name: str) -> list[str]:
        """Evict until the subject is within both caps; returns the evicted ids."""
        usage = self._states.usage(subject)
        if usage.records <= self.caps.max_records and usage.tokens <= self.caps.max_tokens:
            return []
        chosen = victims(self._states.eviction_candidates(subject), self.caps, datetime.now(UTC))
        if not chosen:
            return []
        if self._held is not None and self._held(subject):  # kept, and said: the rows a hold kept are counted
            self._count("held", len(chosen))
            log.info("memory_eviction_held", subject_key=subject, rows=len(chosen))
            return []
        done = self._states.evict(subject, [i for i, _ in chosen])
        self._count("held", len(done.held))
        if done.held:
            log.info("memory_eviction_held", subject_key=subject, rows=len(done.held))
        if not done.ids:
            return []
        self._count("evicted", len(done.ids))
        if self._journal is not None:
            self._journal.record(LifecycleEntry("evicted", subject, app_name, done.ids))
        log.info("memory_evicted", subject_key=subject, rows=len(done.ids))
        return done.ids

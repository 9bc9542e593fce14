"""Figure 7: what sealing costs the agent's hot paths, measured side by side in one run.

Sessions: one conversation of ``events`` events appended through the sealed session service agents get
(``Platform.adk_session_service``) and one through google-adk's plain ``DatabaseSessionService``, the same
words and state deltas; median milliseconds per ``append_event`` and per ``get_session`` of the whole
conversation; the figures are sealed / plain.

Memory search: one user holds ``rows`` memory rows written through ``MemoryStore.insert`` (content and
embedding sealed under their data key and kept rotated by it; pgvector ranks the rotated vectors against the
query rotated the same way, ``stores.memory.search``); a
twin holds the same words with plain pgvector embeddings (the layout before embeddings were sealed), searched
the old way (``ORDER BY embedding <=> q LIMIT 10``, then the ten contents opened). Median of ``repeats``
searches each, same queries; the figure is sealed / plain.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from dataclasses import dataclass

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService
from google.genai import types

from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.embedding import HashingEmbedder, vector_literal
from stores.privacy.identity import subject_key

WORDS = [
    "flight",
    "hotel",
    "seat",
    "window",
    "aisle",
    "lisbon",
    "porto",
    "berlin",
    "tea",
    "coffee",
    "vegetarian",
    "fish",
    "train",
    "station",
    "river",
    "booking",
    "refund",
    "passport",
    "allergy",
    "meeting",
    "office",
    "garden",
    "museum",
    "dinner",
    "lunch",
    "airport",
    "gate",
    "delay",
    "taxi",
]
QUERIES = ("window seat flight", "hotel near the river", "vegetarian dinner", "train to porto", "passport refund")


@dataclass(frozen=True)
class SearchCost:
    rows: int
    sealed_ms: float
    plain_ms: float

    @property
    def ratio(self) -> float:
        return self.sealed_ms / self.plain_ms if self.plain_ms else 0.0


def _texts(rows: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(rows)]


def seed_search_users(platform: Platform, app: str, rows: int, seed: int = 7) -> tuple[str, str]:
    """(sealed user, plain twin), each holding ``rows`` rows of the same words."""
    rng = random.Random(seed)  # noqa: S311 - reproducible words, not secrets
    run = uuid.uuid4().hex[:8]
    sealed_user, plain_user = f"bench-sealed-{run}", f"bench-plain-{run}"
    texts = _texts(rows, rng)
    for start in range(0, rows, 1000):
        platform.memory_store.insert(
            [NewMemory(app, sealed_user, t, purpose="bench") for t in texts[start : start + 1000]]
        )
    embedder = HashingEmbedder()
    twin = subject_key(platform.config.subject_secret, app, plain_user)
    with platform.pool.connection() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memories (id, app_name, user_id, subject_key, kind, key_id, content_sealed, embedding, "
            "purpose) VALUES (%s, %s, %s, %s, 'episode', %s, '\\x00'::bytea, %s::vector, 'bench')",
            [(uuid.uuid4(), app, twin, twin, uuid.uuid4(), vector_literal(embedder.embed(t))) for t in texts],
        )
    return sealed_user, plain_user


def _plain_search(platform: Platform, app: str, user: str, query: str, opened: list[tuple[uuid.UUID, bytes]]) -> int:
    """The search before embeddings were sealed: pgvector ranks, then the ten contents are opened."""
    vec = vector_literal(HashingEmbedder().embed(query))
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, content_sealed FROM memories WHERE app_name = %s AND user_id = %s "
            "ORDER BY embedding <=> %s::vector LIMIT 10",
            (app, subject_key(platform.config.subject_secret, app, user), vec),
        ).fetchall()
    for row_id, sealed in opened[: len(rows)]:  # the twin's bytes are opaque: open the sealed user's ten
        platform.memory_store.decrypt_row(row_id, sealed)
    return len(rows)


def search_cost(platform: Platform, app: str, rows: int, repeats: int = 15) -> SearchCost:
    sealed_user, plain_user = seed_search_users(platform, app, rows)
    with platform.pool.connection() as conn:
        sample = conn.execute(
            "SELECT id, content_sealed FROM memories WHERE app_name = %s AND user_id = %s LIMIT 10",
            (app, subject_key(platform.config.subject_secret, app, sealed_user)),
        ).fetchall()
    opened = [(r[0], bytes(r[1])) for r in sample]
    sealed_times: list[float] = []
    plain_times: list[float] = []
    for n in range(repeats + 1):
        query = QUERIES[n % len(QUERIES)]
        t = time.perf_counter()
        found = platform.memory_store.search(app, sealed_user, query, everything=True)
        sealed = time.perf_counter() - t
        t = time.perf_counter()
        _plain_search(platform, app, plain_user, query, opened)
        plain = time.perf_counter() - t
        if not found:
            raise RuntimeError("the sealed user's search found nothing")
        if n:  # the first of each warms caches (the data key, the plan)
            sealed_times.append(sealed)
            plain_times.append(plain)
    return SearchCost(rows, statistics.median(sealed_times) * 1000, statistics.median(plain_times) * 1000)


@dataclass(frozen=True)
class SessionCost:
    events: int
    append_sealed_ms: float  # median per appended event
    append_plain_ms: float
    load_sealed_ms: float  # median per get_session of the whole conversation
    load_plain_ms: float

    @property
    def append_ratio(self) -> float:
        return self.append_sealed_ms / self.append_plain_ms if self.append_plain_ms else 0.0

    @property
    def load_ratio(self) -> float:
        return self.load_sealed_ms / self.load_plain_ms if self.load_plain_ms else 0.0


async def _conversation(
    service: BaseSessionService, app: str, user: str, events: int, loads: int
) -> tuple[float, float]:
    """(median seconds per append_event, median seconds per get_session) of one conversation."""
    session = await service.create_session(app_name=app, user_id=user, state={"user:home": "Lisbon"})
    appends: list[float] = []
    for n in range(events):
        text = f"turn {n}: " + " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(12))
        event = Event(
            invocation_id=f"inv-{n}",
            author="user" if n % 2 == 0 else "model",
            content=types.Content(role="user" if n % 2 == 0 else "model", parts=[types.Part(text=text)]),
            actions=EventActions(state_delta={"last_topic": text[:40]}),
        )
        t = time.perf_counter()
        await service.append_event(session, event)
        appends.append(time.perf_counter() - t)
    reads: list[float] = []
    for _ in range(loads + 1):
        t = time.perf_counter()
        loaded = await service.get_session(app_name=app, user_id=user, session_id=session.id)
        reads.append(time.perf_counter() - t)
        if loaded is None or len(loaded.events) != events:
            raise RuntimeError("the conversation did not load back whole")
    return statistics.median(appends[1:]), statistics.median(reads[1:])


async def session_cost(platform: Platform, app: str, events: int = 60, loads: int = 10) -> SessionCost:
    """Append ``events`` events to one conversation and load it ``loads`` times, through the sealed service
    agents get and through google-adk's plain one (the same words), side by side in one run."""
    run = uuid.uuid4().hex[:8]
    sealed = platform.adk_session_service()
    plain = platform.plain_adk_session_service()
    try:
        await _conversation(plain, app, f"bench-warm-{run}", 3, 1)  # connections, tables, the plan cache
        await _conversation(sealed, app, f"bench-warm2-{run}", 3, 1)
        sealed_append, sealed_load = await _conversation(sealed, app, f"bench-sealed-s-{run}", events, loads)
        plain_append, plain_load = await _conversation(plain, app, f"bench-plain-s-{run}", events, loads)
    finally:
        await sealed.db_engine.dispose()
        await plain.db_engine.dispose()
    return SessionCost(events, sealed_append * 1000, plain_append * 1000, sealed_load * 1000, plain_load * 1000)

"""Fill the stores with realistic synthetic users through the real services; deterministic per seed.

google-adk's ``DatabaseSessionService`` writes sessions, events, user and app state; the S3 artifact
service writes session- and user-scoped artifacts with several versions; the fenced memory service
ingests sessions and facts, and the summariser adds cross-user summaries; the log shipper writes lines
that name users in fields and in free text. Each user's data key is created on first use.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.adapters.interface import Seeded
from stores.logs.archive import LogLine
from stores.platform import Platform


@dataclass(frozen=True)
class Size:
    sessions: int
    events_per_session: int
    artifacts: int  # distinct artifact names (half session-scoped, some user-scoped)
    versions: int
    facts: int
    log_segments: int
    lines_per_segment: int
    cached_responses: int = 0
    chroma_memories: int = 0


SIZES = {
    "small": Size(
        sessions=2,
        events_per_session=4,
        artifacts=3,
        versions=2,
        facts=2,
        log_segments=2,
        lines_per_segment=3,
        cached_responses=2,
        chroma_memories=3,
    ),
    "typical": Size(
        sessions=8,
        events_per_session=12,
        artifacts=12,
        versions=2,
        facts=10,
        log_segments=6,
        lines_per_segment=6,
        cached_responses=6,
        chroma_memories=10,
    ),
    "large": Size(
        sessions=200,
        events_per_session=50,
        artifacts=500,
        versions=2,
        facts=0,
        log_segments=50,
        lines_per_segment=20,
        cached_responses=100,
        chroma_memories=500,
    ),
}

_SYLLABLES = [
    "vel",
    "bris",
    "quor",
    "an",
    "del",
    "tam",
    "ozy",
    "ruk",
    "pel",
    "mir",
    "zan",
    "tho",
    "gri",
    "lux",
]
CITIES = ["Lisbon", "Tampere", "Ghent", "Porto", "Aarhus", "Leeds", "Utrecht", "Graz", "Bergen", "Cork"]
TOPICS = ["inhaler refill", "billing dispute", "delivery address", "appointment", "password reset", "refund"]
TEMPLATES = [
    "my daughter has asthma so please send the replacement inhaler to my sister in {city}",
    "I ordered the {word} kit last week and it still has not arrived in {city}",
    "can you move my appointment about the {topic} to next Tuesday",
    "my account number ends in {digits} and the {word} charge is wrong",
    "please remember that I prefer email and my {word} plan renews in May",
    "the {topic} case from {city} is still open, reference {word}",
]
AGENT_REPLIES = [
    "I have noted the {topic} request and will follow up",
    "Thanks, I updated the record for the {topic}",
    "The {word} item is now scheduled for delivery",
]


def coined_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(4))


def user_ids(count: int, seed: int, prefix: str = "user") -> list[str]:
    return [f"{prefix}-{seed}-{i:04d}@example.org" for i in range(count)]


@dataclass
class UserSeed:
    app_name: str
    user_id: str
    session_ids: list[str] = field(default_factory=list)
    events: int = 0
    artifact_versions: int = 0
    memory_ids: list[uuid.UUID] = field(default_factory=list)
    log_lines: int = 0
    signature_words: list[str] = field(default_factory=list)
    cached_responses: int = 0
    chroma_memories: int = 0


@dataclass
class SeedReport:
    users: list[UserSeed]
    summaries: int = 0
    log_segments: int = 0
    #: what the stores' own seed hooks wrote (``Seeded`` adapters), by store, summed over the users
    stores: dict[str, dict[str, int]] = field(default_factory=dict)


def _sentence(rng: random.Random, words: Sequence[str], templates: Sequence[str]) -> str:
    return rng.choice(templates).format(
        city=rng.choice(CITIES),
        word=rng.choice(words),
        topic=rng.choice(TOPICS),
        digits=rng.randint(1000, 9999),
    )


async def seed_user(
    platform: Platform, app_name: str, user_id: str, size: Size, rng: random.Random, adk: object | None = None
) -> UserSeed:
    from google.adk.sessions import DatabaseSessionService

    service = adk if isinstance(adk, DatabaseSessionService) else platform.adk_session_service()
    seed = UserSeed(app_name, user_id, signature_words=[coined_word(rng) for _ in range(3)])
    words = seed.signature_words
    try:
        for s in range(size.sessions):
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            session = await service.create_session(
                app_name=app_name,
                user_id=user_id,
                session_id=sid,
                state={
                    "topic": rng.choice(TOPICS),
                    "user:preferred_city": rng.choice(CITIES),
                    "app:tier": "eu",
                },
            )
            seed.session_ids.append(sid)
            for e in range(size.events_per_session):
                author = "user" if e % 2 == 0 else "support_agent"
                text = _sentence(rng, words, TEMPLATES if author == "user" else AGENT_REPLIES)
                event = Event(
                    invocation_id=f"inv-{s}-{e // 2}",
                    author=author,
                    content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
                )
                await service.append_event(session, event)
                seed.events += 1
            await platform.memory_service.add_session_to_memory(session)
        await _seed_artifacts(platform, seed, size, rng)
        _seed_cache(platform, seed, size, rng)
        _seed_chroma(platform, seed, size)
        if size.facts:
            facts = [
                MemoryEntry(
                    content=types.Content(role="user", parts=[types.Part(text=_sentence(rng, words, TEMPLATES))]),
                    author="extractor",
                    custom_metadata={"kind": "fact"},
                )
                for _ in range(size.facts)
            ]
            await platform.memory_service.add_memory(
                app_name=app_name,
                user_id=user_id,
                memories=facts,
                custom_metadata={"purpose": "personalisation", "retention": "preference"},
            )
        seed.memory_ids = [row_id for row_id, _ in platform.memory_store.rows_of(app_name, user_id)]
    finally:
        if service is not adk:
            await service.db_engine.dispose()
    return seed


async def _seed_artifacts(platform: Platform, seed: UserSeed, size: Size, rng: random.Random) -> None:
    svc = platform.artifact_service
    for a in range(size.artifacts):
        user_scoped = a % 4 == 3 or not seed.session_ids
        filename = f"user:profile-{a}.txt" if user_scoped else f"upload-{a}.txt"
        session_id = None if user_scoped else seed.session_ids[a % len(seed.session_ids)]
        for v in range(size.versions):
            text = f"v{v} " + _sentence(rng, seed.signature_words, TEMPLATES)
            await svc.save_artifact(
                app_name=seed.app_name,
                user_id=seed.user_id,
                filename=filename,
                session_id=session_id,
                artifact=types.Part.from_bytes(data=text.encode(), mime_type="text/plain"),
            )
            seed.artifact_versions += 1


def _seed_cache(platform: Platform, seed: UserSeed, size: Size, rng: random.Random) -> None:
    """Cached model responses quoting the user's prompts (when the platform has a response cache)."""
    if not size.cached_responses or not platform.config.cache_url:
        return
    cache = platform.response_cache
    for n in range(size.cached_responses):
        prompt = f"q{n} " + _sentence(rng, seed.signature_words, TEMPLATES)
        answer = "Here is what I found: " + _sentence(rng, seed.signature_words, AGENT_REPLIES)
        if cache.put(seed.app_name, seed.user_id, prompt, answer):
            seed.cached_responses += 1


def _seed_chroma(platform: Platform, seed: UserSeed, size: Size) -> None:
    """Memories in the Chroma backend (when the platform has one): facts and one summary derived from them.

    Drawn from a generator of their own, so the other stores' seeded data stays what it was without Chroma."""
    if not size.chroma_memories or not platform.config.chroma_path:
        return
    from stores.memory.store import NewMemory

    rng = random.Random(f"{seed.user_id}:chroma")  # noqa: S311 - synthetic data, not secrets
    facts = [
        NewMemory(seed.app_name, seed.user_id, _sentence(rng, seed.signature_words, TEMPLATES), kind="fact")
        for _ in range(size.chroma_memories - 1)
    ]
    summary = NewMemory(
        seed.app_name,
        seed.user_id,
        "summary: " + " ".join(f.text for f in facts[:3]),
        kind="summary",
        derived_from=[f.id for f in facts[:3]],
    )
    seed.chroma_memories += platform.chroma_memory.add([*facts, summary])


def planned_log_lines(
    seeds: Sequence[UserSeed], size: Size, rng: random.Random, start: datetime
) -> dict[int, list[LogLine]]:
    """Lines per window index; every user gets lines in ``size.log_segments`` windows."""
    windows: dict[int, list[LogLine]] = {}
    for seed in seeds:
        for w in range(size.log_segments):
            for n in range(size.lines_per_segment):
                ts = (start + timedelta(minutes=5 * w, seconds=n)).isoformat()
                kind = n % 3
                if kind == 0:
                    line = LogLine(
                        ts, seed.app_name, seed.user_id, "info", f"turn completed topic={rng.choice(TOPICS)}"
                    )
                elif kind == 1:
                    line = LogLine(
                        ts,
                        seed.app_name,
                        seed.user_id,
                        "info",
                        "request body: " + _sentence(rng, seed.signature_words, TEMPLATES),
                    )
                else:
                    line = LogLine(
                        ts,
                        seed.app_name,
                        None,
                        "warning",
                        f"rate limit reached for {seed.user_id} on tool lookup_order",
                        mentioned=(seed.user_id,),
                    )
                windows.setdefault(w, []).append(line)
                seed.log_lines += 1
    return windows


async def seed_platform(
    platform: Platform,
    app_name: str,
    users: Sequence[str],
    size_name: str,
    seed: int,
    *,
    summaries: bool = True,
    progress: Callable[[str], None] | None = None,
) -> SeedReport:
    size = SIZES[size_name]
    rng = random.Random(f"{seed}:{app_name}:{size_name}")  # noqa: S311 - synthetic data, not crypto
    service = platform.adk_session_service()
    report = SeedReport(users=[])
    try:
        for user_id in users:
            report.users.append(await seed_user(platform, app_name, user_id, size, rng, adk=service))
            if progress:
                progress(f"seeded {len(report.users)}/{len(users)} users")
    finally:
        await service.db_engine.dispose()
    if summaries and len(report.users) >= 2:
        report.summaries = _cross_user_summaries(platform, app_name, report.users, rng)
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=rng.randint(0, 24 * 300))
    windows = planned_log_lines(report.users, size, rng, start)
    for w, lines in sorted(windows.items()):
        platform.logs.ship(lines, start + timedelta(minutes=5 * w), shard=rng.randint(0, 3))
    report.log_segments = len(windows)
    report.stores = _seed_stores(platform, app_name, users, seed)
    return report


def _seed_stores(platform: Platform, app_name: str, users: Sequence[str], seed: int) -> dict[str, dict[str, int]]:
    """Each registered store with a seed hook (``Seeded``) writes its demo data of every user, from a random
    generator of its own (so no other store's seeded data changes when a store is added)."""
    if not platform.adapters_wired:
        return {}
    written: dict[str, dict[str, int]] = {}
    for adapter in platform.adapters.in_order():
        if not isinstance(adapter, Seeded):
            continue
        rng = random.Random(f"{seed}:{app_name}:{adapter.name}")  # noqa: S311 - synthetic data, not crypto
        counts = written.setdefault(adapter.name, {})
        for user_id in users:
            for kind, n in adapter.seed(app_name, user_id, rng).items():
                counts[kind] = counts.get(kind, 0) + n
    return written


def _cross_user_summaries(platform: Platform, app_name: str, users: Sequence[UserSeed], rng: random.Random) -> int:
    """Summaries that merge several users' memories, filed under one of them or a shared scope."""
    made = 0
    for i in range(len(users)):
        a, b = users[i], users[(i + 1) % len(users)]
        picks = rng.sample(a.memory_ids, min(2, len(a.memory_ids))) + rng.sample(
            b.memory_ids, min(2, len(b.memory_ids))
        )
        owner = b.user_id if i % 2 == 0 else "scope:team-summaries"
        if picks and platform.memory_store.summarise(app_name, owner, picks):
            made += 1
    return made

"""Seed a platform of many users straight into each store's own format: COPY, concurrent puts, bulk keys.

``workers.stack.seeding.seeder`` goes through google-adk's services one row at a time (~0.6 s a ``typical``
user): right for realism tests and the users a benchmark measures, hours for a platform of 100,000 users. This
module writes what those services write for the same kind of users, in bulk, reusing the stores' own code for
every value:

==================  =========================================================================================
store               written here as
==================  =========================================================================================
data keys           ``DataKeyStore.generate_many``: one key per user, one KMS call each on a thread pool (or
                    wrapped offline by the local KMS, ``workers.local_kms.offline_wrapper``), rows by COPY
sessions, events,   COPY into google-adk's v1 tables, as ``SealedSessionService`` files them: ``user_id`` is the
user_states,        subject key; ``events.event_data`` is ``Event.model_dump`` (what ``StorageEvent.from_event``
app_states          stores) sealed whole, and each state value sealed, by ``RowSealer``; ``app_states`` plain
memories            COPY of ``MemoryStore.rows`` of the rows the memory service would write: episodes and facts
                    of each session (``session_memories``), facts through ``entry_memory``, cross-user
                    summaries (``summary_of``), each passed through the capture checks (``refusal``)
artifacts           ``S3ArtifactService`` itself writes each version into a recorder (so body, key, metadata
                    are the service's), then the puts go to S3 from a process of their own (``bulk_puts``)
logs                ``LogArchive.ship``: one segment per chunk of users and log window, sealed lines, subject index
==================  =========================================================================================

The tables are then analysed (fresh planner statistics, as autovacuum keeps them on a live platform).

Not written: the response cache and the Chroma backend (``cached_responses``, ``chroma_memories`` of a size
are ignored). Texts are drawn so that no two of a user's memory rows say the same words (the memory service
would reinforce the first instead of writing the second). Everything about a user is drawn from a generator
seeded by (seed, app, user id) and the seeding's start time, so ``plan_user`` gives it back for a check
(``bulk_check``); only the data keys, the summaries' and log lines' random parts are not replayable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions import Session
from google.adk.sessions.schemas.shared import timestamp_to_utc_datetime
from google.genai import types

from stores.artifacts.service import S3ArtifactService
from stores.logs.archive import LogArchive, segment_key
from stores.memory.capture import refusal
from stores.memory.entries import capture_of, entry_memory
from stores.memory.service import SessionCapture, session_memories
from stores.memory.store import INSERT_COLUMNS, MemoryStore, NewMemory, summary_of
from stores.platform import Platform
from stores.privacy.embedding import tokens
from stores.privacy.identity import subject_key
from stores.privacy.keys import DataKeyStore
from stores.sessions.sealing import RowSealer
from workers.stack.seeding.bulk_puts import PutProcess
from workers.stack.seeding.seeder import (
    AGENT_REPLIES,
    CITIES,
    SIZES,
    TEMPLATES,
    TOPICS,
    Size,
    UserSeed,
    coined_word,
    planned_log_lines,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: a background user of a large platform: two short conversations, a few facts, one artifact in two versions
BACKGROUND = Size(
    sessions=2, events_per_session=4, artifacts=1, versions=2, facts=2, log_segments=1, lines_per_segment=3
)
#: ten times ``large`` (100,000 events, 10,000 artifact versions, ~130,000 memory rows, 10,000 log lines): the
#: benchmark's ``huge`` user, bulk-seeded only (through the services it would take hours)
HUGE = dataclasses.replace(
    SIZES["large"],
    sessions=SIZES["large"].sessions * 10,
    artifacts=SIZES["large"].artifacts * 10,
    log_segments=SIZES["large"].log_segments * 10,
)
SHAPES: dict[str, Size] = {"background": BACKGROUND, **SIZES, "huge": HUGE}
APP_STATE = {"tier": "eu"}  # what the seeder's sessions put in app state ("app:tier")
SHARED_SCOPE = "scope:team-summaries"  # owner of half the cross-user summaries, as in workers.stack.seeding.seeder
#: log segments of bulk seeding use shards from here on (the seeder's use 0-3), so no segment is overwritten
LOG_SHARD_BASE = 10
_FACT_META = {"purpose": "personalisation", "retention": "preference"}


@dataclass(frozen=True)
class PlannedSession:
    id: str
    topic: str
    city: str  # "user:preferred_city" given at creation
    created: datetime  # aware, UTC
    events: list[Event]


@dataclass(frozen=True)
class UserPlan:
    """Everything one bulk-seeded user holds except key material, summaries and log lines."""

    app_name: str
    user_id: str
    subject: str
    words: list[str]  # the user's coined signature words
    sessions: list[PlannedSession]
    facts: list[tuple[uuid.UUID, str]]  # explicit facts (``add_memory``): row id, text
    artifacts: list[tuple[str, str | None, list[str]]]  # filename, session id (None: user scope), version texts

    @property
    def user_state(self) -> dict[str, str]:
        """``user_states.state``: the last session's ``user:`` value wins, as in google-adk."""
        return {"preferred_city": self.sessions[-1].city} if self.sessions else {}

    def adk_session(self, planned: PlannedSession) -> Session:
        """The session after its appends, as the memory service ingests it (filed under the subject key)."""
        return Session(app_name=self.app_name, user_id=self.subject, id=planned.id, events=list(planned.events))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def plan_user(app_name: str, user_id: str, subject: str, shape: Size, seed: int, start: datetime) -> UserPlan:
    """The user's data, deterministic for (app, user, shape, seed, start); activity in the 3 days before ``start``."""
    rng = random.Random(f"bulk:{seed}:{app_name}:{user_id}")  # noqa: S311 - synthetic data, not secrets
    words = [coined_word(rng) for _ in range(3)]
    said: set[str] = set()

    def fresh(templates: Sequence[str]) -> str:
        """A sentence whose words the user has not said yet (else the memory service would reinforce): drawn
        again a few times, then given a coined word of its own (a template has few variants)."""
        for attempt in range(100):
            text = rng.choice(templates).format(
                city=rng.choice(CITIES),
                word=rng.choice(words),
                topic=rng.choice(TOPICS),
                digits=rng.randint(1000, 9999),
            )
            if attempt >= 5:
                text = f"{text} ({coined_word(rng)})"
            norm = " ".join(tokens(text))
            if norm not in said:
                said.add(norm)
                return text
        raise ValueError("no fresh sentence in 100 draws")

    begin = start - timedelta(seconds=rng.randint(3600, 3 * 86400))
    sessions: list[PlannedSession] = []
    for s in range(shape.sessions):
        created = begin + timedelta(minutes=30 * s)
        sid, topic, city = _uuid(rng), rng.choice(TOPICS), rng.choice(CITIES)
        events = []
        for e in range(shape.events_per_session):
            author = "user" if e % 2 == 0 else "support_agent"
            text = fresh(TEMPLATES if author == "user" else AGENT_REPLIES)
            events.append(
                Event(
                    id=_uuid(rng),
                    invocation_id=f"inv-{s}-{e // 2}",
                    author=author,
                    timestamp=(created + timedelta(seconds=10 * (e + 1))).timestamp(),
                    content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
                )
            )
        sessions.append(PlannedSession(sid, topic, city, created, events))
    facts = [(uuid.UUID(_uuid(rng)), fresh(TEMPLATES)) for _ in range(shape.facts)]
    artifacts: list[tuple[str, str | None, list[str]]] = []
    for a in range(shape.artifacts):
        user_scoped = a % 4 == 3 or not sessions
        filename = f"user:profile-{a}.txt" if user_scoped else f"upload-{a}.txt"
        session_id = None if user_scoped else sessions[a % len(sessions)].id
        texts = [f"v{v} " + fresh(TEMPLATES) for v in range(shape.versions)]
        artifacts.append((filename, session_id, texts))
    return UserPlan(app_name, user_id, subject, words, sessions, facts, artifacts)


def plan_memories(plan: UserPlan, secret: bytes, capture: SessionCapture) -> list[NewMemory]:
    """The rows the fenced memory service writes for the plan (sessions ingested, facts added), less the
    capture checks' refusals."""
    rows: list[NewMemory] = []
    for planned in plan.sessions:
        rows += session_memories(plan.adk_session(planned), secret, capture)
    for row_id, text in plan.facts:
        entry = MemoryEntry(
            content=types.Content(role="user", parts=[types.Part(text=text)]),
            author="extractor",
            custom_metadata={"kind": "fact"},
        )
        made = entry_memory(plan.app_name, plan.subject, entry, _FACT_META)
        if isinstance(made, NewMemory):
            rows.append(replace(made, id=row_id))
    return [r for r in rows if refusal(r.text, capture_of(r)) is None]


# ----- artifacts: the service writes into a recorder, the puts go out on a thread pool ----------------


class _RecordingS3:
    """Stands in for the S3 client under ``S3ArtifactService``: keeps its puts (sent later, concurrently) and
    answers its version listings from them, so every object is exactly what the service writes."""

    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []
        self._under: dict[str, list[str]] = {}

    def put_object(self, **request: Any) -> dict[str, Any]:
        self.puts.append(request)
        key = str(request["Key"])
        self._under.setdefault(key[: key.rindex("/") + 1], []).append(key)
        return {}

    def get_paginator(self, name: str) -> _RecordingS3:
        if name != "list_objects_v2":
            raise NotImplementedError(name)
        return self

    def paginate(self, *, Bucket: str, Prefix: str, **_: Any) -> Iterator[dict[str, Any]]:
        yield {"Contents": [{"Key": k} for k in self._under.get(Prefix, [])]}

    def take(self) -> list[dict[str, Any]]:
        puts, self.puts, self._under = self.puts, [], {}
        return puts


# ----- the seeder ---------------------------------------------------------------------------------------


@dataclass
class BulkReport:
    app_name: str
    users: list[str]
    shape: Size
    seed: int
    start: datetime
    rows: dict[str, int] = field(default_factory=dict)  # by table
    objects: int = 0
    log_lines: int = 0
    log_segments: int = 0
    keys_generated: int = 0
    kms_calls: int = 0
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds spent waiting on each stage

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def summary(self) -> dict[str, Any]:
        seconds = self.seconds or 1e-9
        return {
            "users": len(self.users),
            "shape": dataclasses.asdict(self.shape),
            "rows": dict(self.rows),
            "objects": self.objects,
            "log_lines": self.log_lines,
            "log_segments": self.log_segments,
            "keys_generated": self.keys_generated,
            "kms_calls": self.kms_calls,
            "seconds": round(self.seconds, 2),
            "users_per_second": round(len(self.users) / seconds, 1),
            "rows_per_second": round(self.total_rows / seconds, 1),
            "objects_per_second": round(self.objects / seconds, 1),
            "stages": {k: round(v, 2) for k, v in self.stages.items()},
        }


def _naive(at: datetime) -> datetime:
    """google-adk's timestamp columns hold naive UTC."""
    return at.astimezone(UTC).replace(tzinfo=None)


@dataclass
class _Chunk:
    """One chunk's rows, ready to COPY."""

    sessions: list[tuple[Any, ...]] = field(default_factory=list)
    user_states: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    memories: list[tuple[Any, ...]] = field(default_factory=list)


_COPIES = (
    ("sessions", "COPY sessions (app_name, user_id, id, state, create_time, update_time) FROM STDIN"),
    ("user_states", "COPY user_states (app_name, user_id, state, update_time) FROM STDIN"),
    ("events", "COPY events (id, app_name, user_id, session_id, invocation_id, timestamp, event_data) FROM STDIN"),
    ("memories", f"COPY memories ({INSERT_COLUMNS}) FROM STDIN"),
)


class BulkSeeder:
    """The stages of one chunk of users: build and seal its rows, record its objects, COPY, ship its logs."""

    def __init__(self, platform: Platform, app_name: str, shape: Size, seed: int) -> None:
        self.platform = platform
        self.app = app_name
        self.shape = shape
        self.seed = seed
        config = platform.config
        self.secret = config.subject_secret
        # a key store of its own: every key generated stays cached for the whole seeding (no re-read, no Decrypt)
        self.keys = DataKeyStore(
            platform.pool,
            platform.kms,
            config.kms_key_id,
            cache_ttl=math.inf,
            per_user_kms_keys=config.per_user_kms_keys,
        )
        self.memory = MemoryStore(platform.pool, self.keys, self.secret)
        self.capture = SessionCapture(*config.session_capture)
        self.recorder = _RecordingS3()
        self.artifacts = S3ArtifactService(
            cast("S3Client", self.recorder), config.artifact_bucket, self.keys, self.secret, platform.pool
        )
        self.logs = LogArchive(platform.s3, config.log_bucket, platform.pool, self.secret, self.keys)
        self.scope = subject_key(self.secret, app_name, SHARED_SCOPE)

    # ----- one chunk ---------------------------------------------------------------------------------

    def build(self, plans: Sequence[UserPlan]) -> _Chunk:
        chunk = _Chunk()
        rows = RowSealer(self.keys, self.secret)
        memories: list[NewMemory] = []
        sources: list[list[tuple[uuid.UUID, str, str | None, str]]] = []
        for plan in plans:
            sk, app = plan.subject, self.app
            for planned in plan.sessions:
                state = rows.seal_state(app, sk, planned.id, {"topic": planned.topic})
                last = planned.events[-1].timestamp if planned.events else planned.created.timestamp()
                chunk.sessions.append(
                    (app, sk, planned.id, json.dumps(state), _naive(planned.created), timestamp_to_utc_datetime(last))
                )
                for event in planned.events:
                    # what StorageEvent.from_event stores, sealed as SealingOrmSession seals it
                    data = rows.seal_event(
                        app, sk, planned.id, event.id, event.model_dump(exclude_none=True, mode="json")
                    )
                    chunk.events.append(
                        (
                            event.id,
                            app,
                            sk,
                            planned.id,
                            event.invocation_id,
                            timestamp_to_utc_datetime(event.timestamp),
                            json.dumps(data),
                        )
                    )
            if plan.sessions:
                sealed = rows.seal_state(app, sk, None, plan.user_state)
                chunk.user_states.append((app, sk, json.dumps(sealed), _naive(plan.sessions[-1].created)))
            mine = plan_memories(plan, self.secret, self.capture)
            memories += mine
            sources.append([(m.id, m.text, m.session_id, sk) for m in mine])
        memories += self._summaries(plans, sources)
        chunk.memories = self.memory.rows(memories)
        return chunk

    def _summaries(
        self, plans: Sequence[UserPlan], sources: Sequence[Sequence[tuple[uuid.UUID, str, str | None, str]]]
    ) -> list[NewMemory]:
        """One summary per user of two of its rows and two of the next user's, filed under the next user or
        the shared scope, as ``workers.stack.seeding.seeder``'s cross-user summaries."""
        out: list[NewMemory] = []
        rng = random.Random(f"bulk-summaries:{self.seed}:{plans[0].user_id}")  # noqa: S311 - synthetic data
        for i, plan in enumerate(plans):
            if len(plans) < 2:
                break
            j = (i + 1) % len(plans)
            picks = rng.sample(sources[i], min(2, len(sources[i]))) + rng.sample(sources[j], min(2, len(sources[j])))
            owner = plans[j].subject if i % 2 == 0 else SHARED_SCOPE
            made = summary_of(plan.app_name, owner, picks)
            if made is not None:
                out.append(made)
        return out

    def app_state(self) -> None:
        """The app's state row (``app:`` keys of the sessions' state), merged into what is there."""
        with self.platform.pool.connection() as conn:
            conn.execute(
                "INSERT INTO app_states (app_name, state, update_time) VALUES (%s, %s::jsonb, LOCALTIMESTAMP) "
                "ON CONFLICT (app_name) DO UPDATE SET state = app_states.state || EXCLUDED.state, "
                "update_time = EXCLUDED.update_time",
                (self.app, json.dumps(APP_STATE)),
            )

    def analyze(self) -> None:
        """Fresh planner statistics after a bulk load, as a live platform's autovacuum keeps them."""
        with self.platform.pool.connection() as conn:
            conn.execute(
                "ANALYZE sessions, events, user_states, memories, data_keys, data_key_versions, log_subject_index"
            )

    def copy(self, chunk: _Chunk) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.platform.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for table, statement in _COPIES:
                data = getattr(chunk, table)
                with cur.copy(statement) as copy:
                    for row in data:
                        copy.write_row(row)
                counts[table] = len(data)
        return counts

    async def record_artifacts(self, plans: Sequence[UserPlan]) -> list[dict[str, Any]]:
        for plan in plans:
            for filename, session_id, texts in plan.artifacts:
                for text in texts:
                    await self.artifacts.save_artifact(
                        app_name=self.app,
                        user_id=plan.user_id,
                        filename=filename,
                        session_id=session_id,
                        artifact=types.Part.from_bytes(data=text.encode(), mime_type="text/plain"),
                    )
        return self.recorder.take()

    def ship_logs(self, plans: Sequence[UserPlan], window: datetime, shard: int) -> tuple[int, int]:
        """The chunk's log lines (``workers.stack.seeding.seeder``'s, for these users), one segment per log window."""
        seeds = [UserSeed(self.app, p.user_id, signature_words=p.words) for p in plans]
        rng = random.Random(f"bulk-logs:{self.seed}:{plans[0].user_id}")  # noqa: S311 - synthetic data
        windows = planned_log_lines(seeds, self.shape, rng, window)
        planned = [segment_key(window + timedelta(minutes=5 * w), shard) for w in windows]
        with self.platform.pool.connection() as conn:
            taken = conn.execute("SELECT count(*) FROM log_segments WHERE segment_key = ANY(%s)", (planned,)).fetchone()
        if taken and taken[0]:
            raise ValueError(f"log segments {planned} exist already: bulk seeding never overwrites a segment")
        for w, lines in sorted(windows.items()):
            self.logs.ship(lines, window + timedelta(minutes=5 * w), shard)
        return sum(len(v) for v in windows.values()), len(windows)


async def bulk_seed(
    platform: Platform,
    app_name: str,
    users: Sequence[str],
    shape: Size | str = "background",
    seed: int = 1,
    *,
    chunk_size: int = 1000,
    threads: int = 8,
    wrap: Callable[[bytes], bytes] | None = None,
    progress: Callable[[str], None] | None = None,
) -> BulkReport:
    """Seed ``users`` (raw ids of users the platform does not hold yet) of ``shape`` in bulk; see the module
    docstring for what each store gets. ``wrap``: offline key wrapping (local KMS only) instead of KMS calls.

    Chunk by chunk, with the stages side by side: the next chunk's keys are generated (a thread) while this
    one's rows are built and sealed (this thread), and this chunk's COPY and log segments (a writer thread)
    and objects (a put process, ``bulk_puts``) go out while the next one is built; at most one chunk
    waits in each. ``report.stages`` has the seconds this thread spent on, or waiting for, each stage."""
    size = SHAPES[shape] if isinstance(shape, str) else shape
    started = time.monotonic()
    start = datetime.now(UTC).replace(microsecond=0)
    report = BulkReport(app_name, list(users), size, seed, start)
    seeder = BulkSeeder(platform, app_name, size, seed)
    chunks = [list(users[i : i + chunk_size]) for i in range(0, len(users), chunk_size)]
    subjects = [[subject_key(seeder.secret, app_name, u) for u in c] for c in chunks]
    shard = LOG_SHARD_BASE + seed % 80
    log_start = start - timedelta(days=1)
    seeder.app_state()

    def keys_for(n: int) -> int:
        return seeder.keys.generate_many(
            [*subjects[n], *([seeder.scope] if n == 0 else [])], threads=threads, wrap=wrap
        )

    def write(n: int, chunk: _Chunk, plans: Sequence[UserPlan]) -> tuple[dict[str, int], tuple[int, int]]:
        copied = seeder.copy(chunk)
        return copied, seeder.ship_logs(plans, log_start + timedelta(minutes=5 * size.log_segments * n), shard)

    async def waited(stage: str, future: Future[Any] | None) -> Any:
        t = time.monotonic()
        result = None if future is None else await asyncio.wrap_future(future)
        report.stages[stage] = report.stages.get(stage, 0.0) + time.monotonic() - t
        return result

    def took(stage: str, since: float) -> None:
        report.stages[stage] = report.stages.get(stage, 0.0) + time.monotonic() - since

    writes: Future[tuple[dict[str, int], tuple[int, int]]] | None = None
    puts: Future[int] | None = None
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="bulk-keys") as keygen,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="bulk-write") as writer,
        PutProcess(platform.config.aws, threads) as putter,
    ):
        next_keys = keygen.submit(keys_for, 0) if chunks else None
        for n, names in enumerate(chunks):
            report.keys_generated += await waited("keys (waited)", next_keys)
            next_keys = keygen.submit(keys_for, n + 1) if n + 1 < len(chunks) else None
            t = time.monotonic()
            plans = [plan_user(app_name, u, sk, size, seed, start) for u, sk in zip(names, subjects[n], strict=True)]
            built = seeder.build(plans)
            took("build and seal rows", t)
            t = time.monotonic()
            recorded = await seeder.record_artifacts(plans)
            took("artifact service (recorded)", t)
            _count(report, await waited("COPY and logs (waited)", writes))
            writes = writer.submit(write, n, built, plans)
            report.objects += await waited("S3 puts (waited)", puts) or 0
            puts = putter.submit(recorded)
            if progress:
                progress(f"bulk-seeded {min((n + 1) * chunk_size, len(users))}/{len(users)} users")
        _count(report, await waited("COPY and logs (waited)", writes))
        report.objects += await waited("S3 puts (waited)", puts) or 0
    t = time.monotonic()
    await asyncio.to_thread(seeder.analyze)
    took("ANALYZE", t)
    report.rows["data_keys"] = report.keys_generated
    report.kms_calls = seeder.keys.kms_calls
    report.seconds = time.monotonic() - started
    return report


def _count(report: BulkReport, written: tuple[dict[str, int], tuple[int, int]] | None) -> None:
    if written is None:
        return
    copied, (lines, segments) = written
    for table, count in copied.items():
        report.rows[table] = report.rows.get(table, 0) + count
    report.log_lines += lines
    report.log_segments += segments

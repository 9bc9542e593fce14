"""Read a sample of bulk-seeded users back through the services, and google-adk's own plain session service.

``workers.stack.seeding.bulk_seed`` writes rows and objects without the services; this proves they are what the services
write, by reading them back as an agent would, against each user's plan (``plan_user``, replayed from the
seed and the seeding's start):

- ``Platform.adk_session_service()`` (sealed, by raw user id): the user's sessions, every event (id,
  invocation, author, text, time) and the merged state (session, ``user:``, ``app:``), and the user state;
- google-adk's plain ``DatabaseSessionService``: it sees the rows by their stored ``user_id``, the subject
  key, and sees sealed content. It can assert the structure only: the same sessions, the same event ids,
  invocations and times in order, every event without readable content (the sealed dump has no field an
  ``Event`` knows, so it loads empty) and every user-held state value in sealed form (``app:`` state plain);
- the memory store and the fenced memory service: every row the plan implies, filed under the user, and a
  search for one of the user's sentences finds it;
- the artifact service: every artifact, every version, each opening to its text;
- the log archive: the user's segments through the subject index, every line opened and naming the user;
- the data key store: one key.

Failures name the subject key and what differed, never a raw id or a text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.sessions import DatabaseSessionService, Session

from stores.memory.entries import content_text
from stores.memory.service import SessionCapture
from stores.platform import Platform
from stores.privacy.embedding import tokens
from stores.privacy.identity import subject_key
from stores.sessions.sealed_service import SealedSessionService
from stores.sessions.sealing import event_is_sealed, state_value_is_sealed
from workers.stack.seeding.bulk_seed import APP_STATE, BulkReport, PlannedSession, UserPlan, plan_memories, plan_user


@dataclass
class SampleCheck:
    users: list[str] = field(default_factory=list)  # subject keys read back
    checks: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.users) and not self.failures

    def expect(self, ok: bool, subject: str, what: str) -> None:
        self.checks += 1
        if not ok:
            self.failures.append(f"{subject}: {what}")


def _events(events: Sequence[Any]) -> list[tuple[str, str, str, float]]:
    return [(e.id, e.invocation_id, e.author, round(float(e.timestamp), 6)) for e in events]


async def _read_sessions(
    out: SampleCheck, service: DatabaseSessionService, plan: UserPlan, user_id: str, who: str
) -> list[tuple[PlannedSession, Session]]:
    """The user's sessions as ``service`` lists and gets them by ``user_id``, with the plan's for each."""
    listed = await service.list_sessions(app_name=plan.app_name, user_id=user_id)
    out.expect({s.id for s in listed.sessions} == {p.id for p in plan.sessions}, plan.subject, f"{who}: session ids")
    found: list[tuple[PlannedSession, Session]] = []
    for planned in plan.sessions:
        got = await service.get_session(app_name=plan.app_name, user_id=user_id, session_id=planned.id)
        out.expect(got is not None, plan.subject, f"{who}: a session is missing")
        if got is not None:
            found.append((planned, got))
    return found


async def _sealed_sessions(out: SampleCheck, service: SealedSessionService, plan: UserPlan) -> None:
    sk = plan.subject
    for planned, got in await _read_sessions(out, service, plan, plan.user_id, "sealed service"):
        out.expect(_events(got.events) == _events(planned.events), sk, "sealed service: event ids, authors, times")
        texts = [content_text(e.content) for e in got.events]
        out.expect(texts == [content_text(e.content) for e in planned.events], sk, "sealed service: event texts")
        want = {"topic": planned.topic, "user:preferred_city": plan.user_state["preferred_city"]}
        out.expect(all(got.state.get(k) == v for k, v in want.items()), sk, "sealed service: session state")
        out.expect(got.state.get("app:tier") == APP_STATE["tier"], sk, "sealed service: app state")
    state = await service.get_user_state(app_name=plan.app_name, user_id=plan.user_id)
    out.expect(state == plan.user_state, sk, "sealed service: user state")


async def _plain_sessions(out: SampleCheck, plain: DatabaseSessionService, plan: UserPlan) -> None:
    """google-adk's plain service, by the stored ``user_id`` (the subject key): structure, and sealed content."""
    sk = plan.subject
    for planned, got in await _read_sessions(out, plain, plan, sk, "plain service"):
        ids = [(e.id, e.invocation_id, round(float(e.timestamp), 6)) for e in got.events]
        want = [(e.id, e.invocation_id, round(float(e.timestamp), 6)) for e in planned.events]
        out.expect(ids == want, sk, "plain service: event ids, invocations, times")
        out.expect(all(e.content is None for e in got.events), sk, "plain service: a readable event")
        held = {k: v for k, v in got.state.items() if not k.startswith("app:")}
        out.expect(
            set(held) == {"topic", "user:preferred_city"} and all(state_value_is_sealed(v) for v in held.values()),
            sk,
            "plain service: session or user state not sealed",
        )
        out.expect(got.state.get("app:tier") == APP_STATE["tier"], sk, "plain service: app state")
    state = await plain.get_user_state(app_name=plan.app_name, user_id=sk)
    out.expect(
        set(state) == set(plan.user_state) and all(state_value_is_sealed(v) for v in state.values()),
        sk,
        "plain service: user state not sealed",
    )


def _raw_events_sealed(out: SampleCheck, platform: Platform, plan: UserPlan) -> None:
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT event_data FROM events WHERE app_name = %s AND user_id = %s", (plan.app_name, plan.subject)
        ).fetchall()
    want = sum(len(p.events) for p in plan.sessions)
    out.expect(len(rows) == want and all(event_is_sealed(r[0]) for r in rows), plan.subject, "events rows sealed")


async def _memory(out: SampleCheck, platform: Platform, plan: UserPlan) -> None:
    sk = plan.subject
    purpose, retention = platform.config.session_capture
    expected = plan_memories(plan, platform.config.subject_secret, SessionCapture(purpose, retention))
    held = {row_id for row_id, _session in platform.memory_store.rows_of(plan.app_name, plan.user_id)}
    out.expect({m.id for m in expected} <= held, sk, "memory: rows of the plan missing")
    said = next((m.text for m in expected if m.kind == "episode"), None)
    if said is None:
        return
    found = await platform.memory_service.search_memory(app_name=plan.app_name, user_id=plan.user_id, query=said)
    texts = {" ".join(tokens(content_text(m.content))) for m in found.memories}
    out.expect(" ".join(tokens(said)) in texts, sk, "memory service: search does not find the user's words")


async def _artifacts(out: SampleCheck, platform: Platform, plan: UserPlan) -> None:
    service, sk = platform.artifact_service, plan.subject
    for filename, session_id, texts in plan.artifacts:
        names = await service.list_artifact_keys(app_name=plan.app_name, user_id=plan.user_id, session_id=session_id)
        out.expect(filename in names, sk, "artifact service: artifact not listed")
        versions = await service.list_versions(
            app_name=plan.app_name, user_id=plan.user_id, filename=filename, session_id=session_id
        )
        out.expect(versions == list(range(len(texts))), sk, "artifact service: versions")
        for version, text in enumerate(texts):
            part = await service.load_artifact(
                app_name=plan.app_name, user_id=plan.user_id, filename=filename, session_id=session_id, version=version
            )
            data = part.inline_data.data if part is not None and part.inline_data else None
            out.expect(data == text.encode(), sk, "artifact service: a version does not open to its text")


def _logs(out: SampleCheck, platform: Platform, plan: UserPlan, lines: int) -> None:
    sk = plan.subject
    segments = platform.logs.segments_of(sk)
    records = platform.logs.lines_of(sk, plan.app_name, segments)
    out.expect(bool(segments) and len(records) == lines, sk, "logs: lines through the subject index")
    named = all(
        not r.get("unreadable") and (r.get("user_id") == plan.user_id or plan.user_id in str(r.get("msg")))
        for r in records
    )
    out.expect(named, sk, "logs: a line unreadable or not naming the user")


async def check_sample(platform: Platform, report: BulkReport, sample: int = 20, seed: int = 0) -> SampleCheck:
    """Read ``sample`` users of ``report`` (drawn with ``seed``) back; see the module docstring."""
    out = SampleCheck()
    picked = random.Random(seed).sample(report.users, min(sample, len(report.users)))  # noqa: S311 - a sample
    secret = platform.config.subject_secret
    sealed = platform.adk_session_service()
    plain = platform.plain_adk_session_service()
    lines = report.shape.log_segments * report.shape.lines_per_segment
    try:
        for user in picked:
            sk = subject_key(secret, report.app_name, user)
            plan = plan_user(report.app_name, user, sk, report.shape, report.seed, report.start)
            out.users.append(sk)
            await _sealed_sessions(out, sealed, plan)
            await _plain_sessions(out, plain, plan)
            _raw_events_sealed(out, platform, plan)
            await _memory(out, platform, plan)
            await _artifacts(out, platform, plan)
            _logs(out, platform, plan, lines)
            out.expect(platform.keys.count(sk) == 1, sk, "data keys: not exactly one")
    finally:
        await sealed.db_engine.dispose()
        await plain.db_engine.dispose()
    return out

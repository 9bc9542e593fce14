"""Multi-session histories for item forgetting's tests: real ADK sessions, ingested and recalled through the
platform's fenced memory service (the agent's own path)."""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events.event import Event
from google.adk.sessions import Session
from google.genai import types

from stores.operations.forget_tools import Filer
from stores.platform import Platform
from tests.saga_harness import SagaHarness
from workers.forget_service import file_forget


async def make_sessions(
    platform: Platform, app: str, user: str, turns: list[list[str]], states: list[dict[str, str]] | None = None
) -> list[Session]:
    """One ADK session per list of user turns (with the given session state), through google-adk's service."""
    service = platform.adk_session_service()
    out = []
    try:
        for n, texts in enumerate(turns):
            state = states[n] if states and n < len(states) else {}
            session = await service.create_session(app_name=app, user_id=user, state=dict(state))
            for t, text in enumerate(texts):
                event = Event(
                    invocation_id=f"inv-{n}-{t}",
                    author="user",
                    content=types.Content(role="user", parts=[types.Part(text=text)]),
                )
                await service.append_event(session, event)
            out.append(session)
    finally:
        await service.db_engine.dispose()
    return out


async def ingest(platform: Platform, sessions: list[Session]) -> None:
    for s in sessions:
        await platform.memory_service.add_session_to_memory(s)


async def recall(platform: Platform, app: str, user: str, query: str) -> list[str]:
    """What the agent's memory search returns (texts), through the fenced, forgetting-aware service."""
    found = await platform.memory_service.search_memory(app_name=app, user_id=user, query=query)
    return [" ".join(p.text or "" for p in (m.content.parts or [])) for m in found.memories]


def data_subject_filer(saga: SagaHarness, filed: list[str]) -> Filer:
    """The agent runtime's filer for ``ForgetTools``: files the user's own confirmed forget (``data_subject``:
    no staff approval) through the real service, noting each request id in ``filed``."""

    async def filer(
        app: str,
        uid: str,
        strength: str,
        ids: Sequence[str],
        spans: Sequence[str],
        keys: Sequence[str],
        about: str | None,
    ) -> str:
        done = await file_forget(
            saga.client,
            saga.platform,
            saga.settings,
            app_name=app,
            user_id=uid,
            strength=strength,
            memory_ids=ids,
            spans=spans,
            state_keys=keys,
            about=about,
            path="data_subject",
        )
        filed.append(done.request_id)
        return done.request_id

    return filer

"""Preload through the lifecycle in a real ADK ``Runner`` turn (scripted model, no network): settled beliefs
are put in front of the model; a challenged belief and a decayed episode are not, though ADK's stock preload
(plain search) would have put the challenged one there."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator

import pytest
from google.adk.agents import LlmAgent
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

from stores.memory.preload import SettledMemoryPreload
from stores.platform import Platform
from stores.privacy.identity import subject_key

pytestmark = pytest.mark.integration

APP = "preload-app"


class RecordingModel(BaseLlm):
    model: str = "recording"
    requests: list[str] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(" ".join(p.text or "" for c in llm_request.contents for p in c.parts or []))
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Noted.")]))


async def _turn(platform: Platform, user: str, tool: BaseTool, said: str) -> str:
    model = RecordingModel()
    agent = LlmAgent(name="assistant", model=model, instruction="Plan trips.", tools=[tool])
    sessions = platform.adk_session_service()
    try:
        runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=platform.memory_service)
        session = await sessions.create_session(app_name=APP, user_id=user)
        message = types.Content(role="user", parts=[types.Part(text=said)])
        async for _ in runner.run_async(user_id=user, session_id=session.id, new_message=message):
            pass
    finally:
        await sessions.db_engine.dispose()
    return model.requests[0]


def _entry(text: str, **extra: object) -> MemoryEntry:
    return MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=text)]), custom_metadata=extra)


async def _remember(platform: Platform, user: str, text: str, **extra: object) -> str:
    before = {r for r, _ in platform.memory_store.rows_of(APP, user)}
    meta: dict[str, object] = {"purpose": "trip_planning", "retention": "preference"}
    await platform.memory_service.add_memory(
        app_name=APP, user_id=user, memories=[_entry(text, **extra)], custom_metadata=meta
    )
    (new,) = [r for r, _ in platform.memory_store.rows_of(APP, user) if r not in before]
    return str(new)


def test_only_settled_confident_memories_are_preloaded(platform: Platform) -> None:
    user = f"planner-{uuid.uuid4().hex[:8]}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    said = "Book me flights on the overnight to Lisbon, vegetarian or fish meal?"

    async def scenario() -> tuple[str, str]:
        await _remember(platform, user, "Window seat on overnight flights")
        veg = await _remember(platform, user, "I am vegetarian on flights")
        await _remember(platform, user, "I eat fish on flights now", contradicts=[veg])
        await _remember(platform, user, "Flights to Lisbon were delayed", tier="episode")
        with platform.pool.connection() as conn:  # an old episode now: still searchable, no longer preloaded
            conn.execute(
                "UPDATE memories SET reinforced_at = now() - interval '40 days' WHERE subject_key = %s "
                "AND kind = 'episode'",
                (sk,),
            )
        settled = await _turn(platform, user, SettledMemoryPreload(), said)
        stock = await _turn(platform, user, PreloadMemoryTool(), said)
        return settled, stock

    settled, stock = asyncio.run(scenario())
    assert "Window seat on overnight flights" in settled
    assert "vegetarian on flights" not in settled
    assert "fish on flights now" not in settled
    assert "Lisbon were delayed" not in settled
    assert "vegetarian on flights" in stock  # ADK's stock preload would have put the disputed belief there

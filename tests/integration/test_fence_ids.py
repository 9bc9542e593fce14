"""Issue 12, item 17: the fenced memory service never raises into the agent's turn for an odd id."""

from __future__ import annotations

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.platform import Platform

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_an_id_no_store_can_hold_is_refused_and_counted_not_raised(platform: Platform) -> None:
    service = platform.memory_service
    before = service.refused["invalid_identifier"]
    entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="remember this")]))
    for odd in ("x" * 300, "nul\x00id"):
        await service.add_memory(app_name="fence-ids", user_id=odd, memories=[entry], custom_metadata=PURPOSE)
        found = await service.search_memory(app_name="fence-ids", user_id=odd, query="remember")
        assert found.memories == []
    assert service.refused["invalid_identifier"] == before + 2
    with platform.pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE app_name = 'fence-ids'").fetchone() == (0,)


async def test_ids_adk_stores_are_remembered_normally(platform: Platform) -> None:
    service = platform.memory_service
    entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="my tea is oolong")]))
    for user in (" padded ", "nbsp\u00a0user", "new\U0001fae8"):
        await service.add_memory(app_name="fence-ids", user_id=user, memories=[entry], custom_metadata=PURPOSE)
        found = await service.search_memory(app_name="fence-ids", user_id=user, query="tea")
        assert [m.content.parts[0].text for m in found.memories if m.content and m.content.parts] == [
            "my tea is oolong"
        ]

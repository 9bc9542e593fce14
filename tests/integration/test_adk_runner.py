"""An ADK Runner wired to our S3 artifact service and fenced memory service: data lands where erasure looks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.genai import types

from stores.artifacts.bucket import session_prefix
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key

pytestmark = pytest.mark.integration


class ScriptedAgent(BaseAgent):
    """No model call: answers each turn with a fixed line and files the user's message as an artifact."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        said = ctx.user_content.parts[0].text if ctx.user_content and ctx.user_content.parts else ""
        assert ctx.artifact_service is not None
        await ctx.artifact_service.save_artifact(
            app_name=ctx.app_name,
            user_id=ctx.user_id,
            session_id=ctx.session.id,
            filename="transcript.txt",
            artifact=types.Part.from_bytes(data=(said or "").encode(), mime_type="text/plain"),
        )
        yield Event(
            invocation_id=ctx.invocation_id,
            author=self.name,
            content=types.Content(role="model", parts=[types.Part(text="Noted, I will send it to your sister.")]),
        )


def test_runner_conversation_lands_where_the_adapters_find_it(platform: Platform) -> None:
    app, user = "runner-app", "runner-user@example.org"

    async def converse() -> str:
        sessions = platform.adk_session_service()
        try:
            runner = Runner(
                app_name=app,
                agent=ScriptedAgent(name="support"),
                session_service=sessions,
                artifact_service=platform.artifact_service,
                memory_service=platform.memory_service,
            )
            session = await sessions.create_session(app_name=app, user_id=user)
            for text in ("my daughter has asthma", "send the inhaler to my sister in Ghent"):
                message = types.Content(role="user", parts=[types.Part(text=text)])
                async for _ in runner.run_async(user_id=user, session_id=session.id, new_message=message):
                    pass
            done = await sessions.get_session(app_name=app, user_id=user, session_id=session.id)
            assert done is not None
            await platform.memory_service.add_session_to_memory(done)
            return session.id
        finally:
            await sessions.db_engine.dispose()

    sid = asyncio.run(converse())
    assert platform.sessions.session_ids(app, user) == [sid]
    assert platform.sessions.count_user(app, user).events == 4
    sk = subject_key(platform.config.subject_secret, app, user)
    listing = platform.artifacts.count_prefix(session_prefix(app, sk, sid))
    assert listing.versions == 2  # two saves of transcript.txt: versions 0 and 1
    own, _derived = platform.memory.count_user(sk, [session_ref(sk, sid)])
    assert own >= 4  # episodes of both turns plus the extracted 'my ...' facts
    assert platform.keys.count(sk) == 1

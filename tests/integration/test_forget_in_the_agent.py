"""Forgetting driven by the agent (issue 16): a real ADK ``Runner`` conversation with a scripted model (no
network), from "forget my Pune address" through the user's choice and confirmation of the tool call to a
probe question that no longer recalls the address, while the conversation still in progress is redacted for
the model and the office the description also caught comes back to recall."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools import load_memory
from google.genai import types
from pydantic import Field

from stores.ledgers.forget_tombstones import REDACTED
from stores.operations.forget_tools import ForgetTools, redact_forgotten
from tests.forget_fixtures import data_subject_filer, ingest, make_sessions, recall
from tests.saga_harness import SagaHarness
from workers.forget_service import forget_result

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-agent"
CONFIRM = "adk_request_confirmation"


def _text(content: types.Content) -> str:
    return " ".join(p.text for p in content.parts or [] if p.text)


class ScriptedModel(BaseLlm):
    """Answers by rule from the request (no network): calls the forgetting tools and load_memory when the
    user asks, and reports what the tools returned. Keeps every request it was sent."""

    model: str = "scripted"
    requests: list[str] = Field(default_factory=list)  # the text of every request's contents

    def _reply(self, request: LlmRequest) -> types.Part:
        last = request.contents[-1]
        response = next((p.function_response for p in last.parts or [] if p.function_response), None)
        if response is not None:
            data: dict[str, Any] = dict(response.response or {})
            if response.name == "preview_forget":
                listed = "; ".join(c["description"] for c in data.get("candidates", []))
                return types.Part(text=f"I found: {listed}. Which should I forget?")
            if response.name == "load_memory":
                said = [_text(types.Content(**m["content"])) for m in data.get("memories", [])]
                return types.Part(text="From memory: " + (" | ".join(said) or "nothing"))
            return types.Part(text=f"Done: {data.get('status')}")
        said = _text(last).lower()
        if said.startswith("forget "):
            return types.Part(function_call=types.FunctionCall(name="preview_forget", args={"about": said[7:]}))
        if said.startswith("yes"):  # the user chose the items about where they live
            offered = [
                c
                for content in request.contents
                for p in content.parts or []
                if p.function_response and p.function_response.name == "preview_forget"
                for c in (p.function_response.response or {}).get("candidates", [])
            ]
            chosen = [c["id"] for c in offered if "live in" in c["description"]]
            return types.Part(function_call=types.FunctionCall(name="forget_memories", args={"memory_ids": chosen}))
        if said.endswith("?"):
            return types.Part(function_call=types.FunctionCall(name="load_memory", args={"query": said}))
        return types.Part(text="Noted.")

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(" ".join(_text(c) for c in llm_request.contents))
        yield LlmResponse(content=types.Content(role="model", parts=[self._reply(llm_request)]))


async def _say(runner: Runner, user: str, sid: str, message: types.Content) -> list[Any]:
    return [e async for e in runner.run_async(user_id=user, session_id=sid, new_message=message)]


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def test_forget_where_i_live_with_confirmation_in_a_runner_conversation(saga: SagaHarness) -> None:
    platform = saga.platform
    user = f"agent-user-{uuid.uuid4().hex[:8]}@example.org"
    older = await make_sessions(platform, APP, user, [["Our Pune office is on FC Road."]])
    await ingest(platform, older)
    filed: list[str] = []
    filer = data_subject_filer(saga, filed)
    model = ScriptedModel()
    tools = ForgetTools(platform, filer)
    agent = LlmAgent(
        name="assistant",
        model=model,
        instruction="Help the user. Forget what they ask you to forget, after they confirm.",
        tools=[*tools.tools(), load_memory],
        before_model_callback=redact_forgotten(platform.config.subject_secret),
    )
    sessions = platform.adk_session_service()
    try:
        runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=platform.memory_service)
        session = await sessions.create_session(app_name=APP, user_id=user)
        await _say(runner, user, session.id, _user("I live in Pune near the river."))
        await _say(runner, user, session.id, _user("Our Pune office moved to Baner."))
        current = await sessions.get_session(app_name=APP, user_id=user, session_id=session.id)
        assert current is not None
        await platform.memory_service.add_session_to_memory(current)  # the platform's periodic ingestion
        assert any("live in Pune" in r for r in await recall(platform, APP, user, "where do I live"))

        # "forget my Pune address": previewed (all candidates hidden at once), listed in plain words; the
        # loose description catches the office too, which the user will not choose
        events = await _say(runner, user, session.id, _user("forget my Pune address"))
        said = " ".join(_text(e.content) for e in events if e.content and e.author == "assistant")
        assert "live in Pune" in said
        assert "Pune office" in said
        assert not any("Pune" in r for r in await recall(platform, APP, user, "where do I live Pune office"))

        # "yes": the model calls forget_memories, ADK asks the user to confirm the call before it runs
        events = await _say(runner, user, session.id, _user("yes, forget them"))
        asks = [fc for e in events for fc in (e.get_function_calls() if e.content else []) if fc.name == CONFIRM]
        assert len(asks) == 1
        assert not filed  # nothing filed before the confirmation
        answer = types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(id=asks[0].id, name=CONFIRM, response={"confirmed": True})
                )
            ],
        )
        await _say(runner, user, session.id, answer)
        assert len(filed) == 1
        assert any("Pune office" in r for r in await recall(platform, APP, user, "Pune office"))  # not chosen: back
        result = await asyncio.wait_for(forget_result(saga.client, filed[0]), 120)
        assert result.status == "completed", result

        # the probe question: recall no longer brings the address; the model never sees it again
        events = await _say(runner, user, session.id, _user("where do I live?"))
        recalled = [
            fr.response
            for e in events
            for fr in (e.get_function_responses() if e.content else [])
            if fr.name == "load_memory"
        ]
        assert recalled
        assert "Pune near the river" not in str(recalled)
        last_request = model.requests[-1]
        assert "Pune near the river" not in last_request
        assert REDACTED in last_request
        assert "Our Pune office moved to Baner" in last_request  # not chosen: no longer redacted
        assert any("Pune office" in r for r in await recall(platform, APP, user, "Pune office"))  # not forgotten
        # the session keeps only hashes of what to redact
        final = await sessions.get_session(app_name=APP, user_id=user, session_id=session.id)
        assert final is not None
        assert "pune" not in str(final.state.get("forget_patterns", "")).lower()
    finally:
        await sessions.db_engine.dispose()

"""Issue 28, items 14 and 16: a forget through the agent removes the fact, not one sentence of it.

A real ADK ``Runner`` conversation with a scripted model (no network). The user gave a phone number and the
agent's reply quoted it back; the reply holds neither "phone" nor "number", so the preview never offered it,
and it reached the model again (``load_memory``, a re-ingested session). The preview's own tool answer,
listing the fact, stayed in front of the model too (only text parts were redacted), and the tools could not
name a detail to block. Now the preview offers the reply as an echo, ``forget_memories`` takes the exact
words to block, and redaction covers tool answers and arguments.

With a legal hold on the user, ``forget_memories`` raised out of the runner (the user got no answer and the
preview's suppression stayed behind); now it answers ``held``, files a suppression and deletes nothing.
"""

from __future__ import annotations

import asyncio
import json
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

from stores.operations.forget_tools import ForgetTools, redact_forgotten
from stores.privacy.identity import subject_key
from tests.forget_fixtures import data_subject_filer, recall
from tests.saga_harness import SagaHarness
from workers.forget_service import forget_result

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-the-fact"
CONFIRM = "adk_request_confirmation"
NUMBER = "555 0142"


class PhoneModel(BaseLlm):
    """Answers by rule (no network) and keeps every request whole: text, tool calls and tool answers."""

    model: str = "scripted-phone"
    requests: list[str] = Field(default_factory=list)

    def _reply(self, request: LlmRequest) -> types.Part:
        last = request.contents[-1]
        response = next((p.function_response for p in last.parts or [] if p.function_response), None)
        if response is not None:
            data: dict[str, Any] = dict(response.response or {})
            if response.name == "preview_forget":
                return types.Part(text="I found: " + "; ".join(c["description"] for c in data["candidates"]))
            if response.name == "load_memory":
                return types.Part(text="From memory: " + json.dumps(data.get("memories", [])))
            return types.Part(text=f"Done: {data.get('status')} {data.get('message', '')}")
        said = " ".join(p.text for p in last.parts or [] if p.text).lower()
        if said.startswith("my phone number is"):
            return types.Part(text=f"Got it, I'll call you at {NUMBER} when the parcel arrives.")
        if said.startswith("forget "):
            return types.Part(function_call=types.FunctionCall(name="preview_forget", args={"about": said[7:]}))
        if said.startswith("yes"):
            offered = [
                c["id"]
                for content in request.contents
                for p in content.parts or []
                if p.function_response and p.function_response.name == "preview_forget"
                for c in (p.function_response.response or {}).get("candidates", [])
            ]
            args = {"memory_ids": offered, "spans": [NUMBER]}
            return types.Part(function_call=types.FunctionCall(name="forget_memories", args=args))
        if said.endswith("?"):
            return types.Part(function_call=types.FunctionCall(name="load_memory", args={"query": said}))
        return types.Part(text="Noted.")

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(json.dumps([c.model_dump(mode="json") for c in llm_request.contents]))
        yield LlmResponse(content=types.Content(role="model", parts=[self._reply(llm_request)]))


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _say(runner: Runner, user: str, sid: str, message: types.Content) -> list[Any]:
    return [e async for e in runner.run_async(user_id=user, session_id=sid, new_message=message)]


def _confirmation(events: list[Any]) -> types.Content:
    asks = [fc for e in events for fc in (e.get_function_calls() if e.content else []) if fc.name == CONFIRM]
    assert len(asks) == 1
    reply = types.FunctionResponse(id=asks[0].id, name=CONFIRM, response={"confirmed": True})
    return types.Content(role="user", parts=[types.Part(function_response=reply)])


def _said(events: list[Any]) -> str:
    return " ".join(p.text or "" for e in events if e.content for p in e.content.parts or [])


class Conversation:
    def __init__(self, saga: SagaHarness) -> None:
        self.saga = saga
        self.user = f"phone-user-{uuid.uuid4().hex[:8]}@example.org"
        self.filed: list[str] = []
        self.model = PhoneModel()
        self.sessions = saga.platform.adk_session_service()
        tools = ForgetTools(saga.platform, data_subject_filer(saga, self.filed))
        agent = LlmAgent(
            name="assistant",
            model=self.model,
            instruction="Help the user. Forget what they ask you to forget, after they confirm.",
            tools=[*tools.tools(), load_memory],
            before_model_callback=redact_forgotten(saga.platform.config.subject_secret),
        )
        self.runner = Runner(
            app_name=APP, agent=agent, session_service=self.sessions, memory_service=saga.platform.memory_service
        )

    async def gave_the_number(self) -> str:
        session = await self.sessions.create_session(app_name=APP, user_id=self.user)
        await _say(self.runner, self.user, session.id, _user(f"My phone number is {NUMBER}."))
        current = await self.sessions.get_session(app_name=APP, user_id=self.user, session_id=session.id)
        assert current is not None
        await self.saga.platform.memory_service.add_session_to_memory(current)
        found = await recall(self.saga.platform, APP, self.user, "parcel call")
        assert any("0142" in r for r in found)  # the agent's own reply is a memory too
        return session.id


async def test_forgetting_a_phone_number_removes_the_agents_echo_and_every_copy_in_front_of_the_model(
    saga: SagaHarness,
) -> None:
    talk = Conversation(saga)
    try:
        sid = await talk.gave_the_number()
        events = await _say(talk.runner, talk.user, sid, _user("forget my phone number"))
        offered = _said(events)
        assert "My phone number is" in offered
        assert "I'll call you at" in offered  # the echo: it holds neither "phone" nor "number"
        events = await _say(talk.runner, talk.user, sid, _user("yes, forget them"))
        await _say(talk.runner, talk.user, sid, _confirmation(events))
        assert len(talk.filed) == 1
        result = await asyncio.wait_for(forget_result(saga.client, talk.filed[0]), 120)
        assert result.status == "completed", result

        events = await _say(talk.runner, talk.user, sid, _user("what is my number?"))
        assert "0142" not in _said(events)
        last = talk.model.requests[-1]
        assert "0142" not in last  # nothing in front of the model: text, tool answers (the preview's list), calls
        # a new session, and the old session written back to memory again: the number never returns
        fresh = await talk.sessions.create_session(app_name=APP, user_id=talk.user)
        events = await _say(talk.runner, talk.user, fresh.id, _user("what is my number?"))
        assert "0142" not in _said(events)
        old = await talk.sessions.get_session(app_name=APP, user_id=talk.user, session_id=sid)
        assert old is not None
        await saga.platform.memory_service.add_session_to_memory(old)
        assert not any("0142" in r for r in await recall(saga.platform, APP, talk.user, "parcel call number"))
    finally:
        await talk.sessions.db_engine.dispose()


async def test_under_a_legal_hold_the_forget_tool_answers_held_and_deletes_nothing(saga: SagaHarness) -> None:
    talk = Conversation(saga)
    platform = saga.platform
    try:
        sid = await talk.gave_the_number()
        sk = subject_key(platform.config.subject_secret, APP, talk.user)
        rows_before = len(platform.memory_store.rows_of(APP, talk.user))
        platform.requests.place_hold(sk, APP, "litigation", "counsel@example.org")
        events = await _say(talk.runner, talk.user, sid, _user("forget my phone number"))
        events = await _say(talk.runner, talk.user, sid, _user("yes, forget them"))
        events = await _say(talk.runner, talk.user, sid, _confirmation(events))  # raised out of the runner before
        assert "Done: held" in _said(events)
        assert "legal hold" in _said(events)
        assert len(talk.filed) == 1
        result = await asyncio.wait_for(forget_result(saga.client, talk.filed[0]), 120)
        assert result.status == "completed", result
        assert len(platform.memory_store.rows_of(APP, talk.user)) == rows_before  # nothing deleted
        assert not any("0142" in r for r in await recall(platform, APP, talk.user, "phone number parcel"))  # hidden
    finally:
        platform.requests.release_hold(subject_key(platform.config.subject_secret, APP, talk.user), "done", "counsel")
        await talk.sessions.db_engine.dispose()

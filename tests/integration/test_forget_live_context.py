"""Issue 39, item 7: a forgotten fact must not reach the model again in the same session.

A real ADK ``Runner`` conversation with a scripted model (no network) that keeps every ``LlmRequest`` it is sent,
whole: every part's text, function calls' arguments and function responses, and the system instruction. The
user gives a phone number in a long sentence (more than a span's twelve words), the agent's reply quotes it
back, the user asks to forget it, previews and confirms; the model names the number in its own compact format
(E.164, no spaces) as the detail to block, and chooses the items about the phone, not the agent's reply (the
echo). Before the fix the next request still carried the number: in the user's own turn (too long to be a
span), in the agent's reply (not chosen, and grouped differently from the named detail) and in the preview
tool's answer quoting both. What the model receives next must hold the number nowhere, in any grouping, and
still hold every unrelated word of the conversation: wired as the agent's ``before_model_callback`` and as the
Runner's plugin (``ForgetRedaction``, for every agent of the app).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field

from stores.ledgers.forget_tombstones import REDACTED
from stores.operations.forget_tools import ForgetRedaction, ForgetTools, redact_forgotten
from tests.forget_fixtures import data_subject_filer
from tests.saga_harness import SagaHarness
from workers.forget_service import forget_result

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-live-context"
CONFIRM = "adk_request_confirmation"
NUMBER = "+49 151 2345 6789"
COMPACT = "+4915123456789"  # the same number as the model writes it when naming the detail to block
GAVE = f"My phone number is {NUMBER}, please text me on it when my order from the bakery is ready."
UNRELATED = "Book the table at Casa Lisboa for seven people on 12 May, order 4711."
REPLY = f"Sure, I'll text {NUMBER} when it is ready."


def _digits(request: str) -> str:
    return re.sub(r"\D", "", request)


class RecordingModel(BaseLlm):
    """Answers by rule (no network) and records each request whole: contents (text, calls, responses) and the
    system instruction, as JSON."""

    model: str = "scripted-live-context"
    requests: list[str] = Field(default_factory=list)

    def _reply(self, request: LlmRequest) -> types.Part:
        last = request.contents[-1]
        response = next((p.function_response for p in last.parts or [] if p.function_response), None)
        if response is not None:
            data: dict[str, Any] = dict(response.response or {})
            if response.name == "preview_forget":
                return types.Part(text="I found: " + "; ".join(c["description"] for c in data["candidates"]))
            return types.Part(text=f"Done: {data.get('status')}")
        said = " ".join(p.text for p in last.parts or [] if p.text).lower()
        if said.startswith("my phone number is"):
            return types.Part(text=REPLY)
        if said.startswith("forget "):
            return types.Part(function_call=types.FunctionCall(name="preview_forget", args={"about": said[7:]}))
        if said.startswith("yes"):  # the items about the phone; the agent's reply is an echo the user did not pick
            chosen = [
                c["id"]
                for content in request.contents
                for p in content.parts or []
                if p.function_response and p.function_response.name == "preview_forget"
                for c in (p.function_response.response or {}).get("candidates", [])
                if "phone" in c["description"].lower()
            ]
            args = {"memory_ids": chosen, "spans": [COMPACT]}
            return types.Part(function_call=types.FunctionCall(name="forget_memories", args=args))
        return types.Part(text="Noted, see you then.")

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        system = llm_request.config.system_instruction if llm_request.config else None
        whole = {
            "contents": [c.model_dump(mode="json") for c in llm_request.contents],
            "system": system if isinstance(system, str) else repr(system),
        }
        self.requests.append(json.dumps(whole))
        yield LlmResponse(content=types.Content(role="model", parts=[self._reply(llm_request)]))


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _say(runner: Runner, user: str, sid: str, message: types.Content) -> list[Any]:
    return [e async for e in runner.run_async(user_id=user, session_id=sid, new_message=message)]


@pytest.mark.parametrize("wiring", ["agent_callback", "runner_plugin"])
async def test_after_a_confirmed_forget_the_model_receives_the_number_nowhere(saga: SagaHarness, wiring: str) -> None:
    platform = saga.platform
    secret = platform.config.subject_secret
    user = f"live-user-{uuid.uuid4().hex[:8]}@example.org"
    filed: list[str] = []
    model = RecordingModel()
    agent = LlmAgent(
        name="assistant",
        model=model,
        instruction="Help the user. Forget what they ask you to forget, after they confirm.",
        tools=[*ForgetTools(platform, data_subject_filer(saga, filed)).tools()],
        before_model_callback=redact_forgotten(secret) if wiring == "agent_callback" else None,
    )
    plugins: list[BasePlugin] = [ForgetRedaction(secret)] if wiring == "runner_plugin" else []
    sessions = platform.adk_session_service()
    try:
        app = App(name=APP, root_agent=agent, plugins=plugins)
        runner = Runner(app=app, session_service=sessions, memory_service=platform.memory_service)
        session = await sessions.create_session(app_name=APP, user_id=user)
        sid = session.id
        await _say(runner, user, sid, _user(UNRELATED))
        events = await _say(runner, user, sid, _user(GAVE))
        assert REPLY in " ".join(p.text or "" for e in events if e.content for p in e.content.parts or [])
        current = await sessions.get_session(app_name=APP, user_id=user, session_id=sid)
        assert current is not None
        await platform.memory_service.add_session_to_memory(current)  # the platform's periodic ingestion

        events = await _say(runner, user, sid, _user("forget my phone number"))
        events = await _say(runner, user, sid, _user("yes, forget them"))
        asks = [fc for e in events for fc in (e.get_function_calls() if e.content else []) if fc.name == CONFIRM]
        assert len(asks) == 1
        yes = types.FunctionResponse(id=asks[0].id, name=CONFIRM, response={"confirmed": True})
        await _say(runner, user, sid, types.Content(role="user", parts=[types.Part(function_response=yes)]))
        assert len(filed) == 1
        result = await asyncio.wait_for(forget_result(saga.client, filed[0]), 120)
        assert result.status == "completed", result

        before = len(model.requests)
        await _say(runner, user, sid, _user("Thanks, that is all for today."))
        assert len(model.requests) == before + 1
        last = model.requests[-1]
        # the whole request, calls and responses included: the preview's answer and the call that named it
        assert '"function_response"' in last
        assert "preview_forget" in last
        assert "forget_memories" in last
        assert "6789" not in last
        assert "4915123456789" not in _digits(last)  # in no grouping, not even split across punctuation
        assert REDACTED in last
        # no over-redaction: the unrelated turn, the rest of the agent's reply, the user's other words
        for kept in (UNRELATED, "when it is ready", "Thanks, that is all for today.", "forget my phone number"):
            assert kept in last, kept
    finally:
        await sessions.db_engine.dispose()

"""google-adk events as a user's turn writes them, for tests that seed sessions through the session service."""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types


def user_event(text: str, delta: dict[str, Any] | None = None, inv: str = "inv-1") -> Event:
    """The user's words, with a state delta (``user:`` keys included) as google-adk records one."""
    return Event(
        invocation_id=inv,
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta or {}),
    )

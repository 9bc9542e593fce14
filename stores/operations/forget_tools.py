"""Forgetting in the agent: two ADK tools and a before-model callback (issue 16).

- ``preview_forget(about)`` (no confirmation): resolves the description through the same recall path the
  agent uses, hides the candidates from recall at once (a suppression: reversible, nothing deleted) and
  returns them in plain words with their ids, for the agent to show the user.
- ``forget_memories(memory_ids)`` (ADK's tool confirmation: the user approves the ids before the body
  runs): files a durable forget of exactly those items (``ForgetWorkflow``, through the runtime's
  ``filer``) with the matching ``user:`` state keys the preview found, and returns the request id; the
  candidates the user did not choose come back to recall (only the chosen stay hidden until deleted).
- ``redact_forgotten``: a ``before_model_callback`` that replaces the forgotten items, and their echoes (the
  same number in any grouping, a quote of the item cut anywhere), in every part of the request for the rest of
  the session (events cannot be deleted one by one: the conversation still in progress would otherwise repeat
  them): ``stores.operations.live_redaction``. The session keeps only keyed hashes (``forget_patterns``),
  never the text. ``ForgetRedaction`` is the same callback as a Runner plugin: every agent of the app (a
  sub-agent the tools' agent hands over to included) is sent the conversation redacted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from google.adk.plugins.base_plugin import BasePlugin

from stores.forgetting.resolution import resolve
from stores.ledgers.forget_tombstones import MAX_SPAN_WORDS
from stores.operations.live_redaction import live_patterns, merge, redact_request
from stores.privacy.embedding import tokens
from stores.privacy.identity import subject_key

if TYPE_CHECKING:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.tools.tool_context import ToolContext

    from stores.platform import Platform

#: session state: keyed hashes and word counts of the spans to redact (no text)
PATTERNS_KEY = "forget_patterns"
#: session state: what the last preview offered (ids and user: state key names; no text)
PENDING_KEY = "forget_pending"
#: session state: the patterns of what the user confirmed (redaction narrows to these once they choose)
CONFIRMED_KEY = "forget_confirmed"

#: spans a user may name in one forget (each is the exact words of a detail, e.g. a number)
MAX_SPANS = 10

log = structlog.get_logger("forget_tools")

#: files a confirmed forget: (app, user, strength, memory ids, spans, state keys, about) -> request id
Filer = Callable[[str, str, str, Sequence[str], Sequence[str], Sequence[str], str | None], Awaitable[str]]


class ForgetTools:
    def __init__(self, platform: Platform, filer: Filer) -> None:
        self._platform = platform
        self._filer = filer
        self._secret = platform.config.subject_secret

    async def preview_forget(self, about: str, tool_context: ToolContext) -> dict[str, Any]:
        """Find the stored memories that match what the user wants forgotten and hide them from recall.

        Args:
          about: the user's own words for what to forget, e.g. "where I live".
        """
        session = tool_context.session
        app, user = session.app_name, session.user_id
        platform = self._platform
        secret = platform.config.subject_secret
        found = await asyncio.to_thread(
            resolve, platform.pool, platform.memory_store, secret, app, user, about, limit=10, keys=platform.keys
        )
        ids = [c.memory_id for c in found.candidates]
        hidden = None
        if ids:
            sk = subject_key(secret, app, user)
            hidden = await asyncio.to_thread(platform.forgetting.place, sk, app, "suppress", memory_ids=ids)
        previewed = live_patterns(secret, [c.text for c in found.candidates])  # redacted while the user decides
        tool_context.state[PATTERNS_KEY] = merge(tool_context.state.get(CONFIRMED_KEY), previewed)
        tool_context.state[PENDING_KEY] = {
            "ids": ids,
            "state_keys": [s.key for s in found.state_keys],
            "suppression": hidden,
        }
        return {
            "status": "ok",
            "candidates": [{"id": c.memory_id, "description": c.describe()} for c in found.candidates],
            "settings": [s.key for s in found.state_keys],
            "notes": found.warnings,
            "hidden": "these are hidden from recall now; ask the user which to forget for good",
        }

    async def forget_memories(
        self, memory_ids: list[str], tool_context: ToolContext, spans: list[str] | None = None
    ) -> dict[str, Any]:
        """Permanently forget memories by id, after the user chose them from preview_forget's list.

        Args:
          memory_ids: the ids the user chose.
          spans: optional; the exact words of a detail to block wherever it appears, e.g. a phone number
            the user gave ("555 0142"), so no later reply or summary holding it is kept or recalled.
        """
        session = tool_context.session
        app, user = session.app_name, session.user_id
        pending = tool_context.state.get(PENDING_KEY) or {}
        offered = set(pending.get("ids") or [])
        chosen = [i for i in memory_ids if i in offered]
        named = [s.strip() for s in spans or [] if s and s.strip()][:MAX_SPANS]
        if not chosen:
            return {"status": "error", "error": "none of these ids was offered by preview_forget: preview first"}
        if any(len(tokens(s)) > MAX_SPAN_WORDS for s in named):
            return {"status": "error", "error": f"a detail to block is at most {MAX_SPAN_WORDS} words"}
        items = await asyncio.to_thread(self._texts, app, user, chosen)
        # an item's own words are blocked as a span when short enough to be one (a longer item goes by its id)
        texts = [t for t in items if len(tokens(t)) <= MAX_SPAN_WORDS]
        held = await asyncio.to_thread(self._held, app, user)
        strength = "suppress" if held else "forget"  # a legal hold: hidden from recall, nothing deleted
        try:
            request_id = await self._filer(
                app, user, strength, chosen, [*texts, *named], list(pending.get("state_keys") or []), None
            )
        except Exception as exc:  # the user gets an answer, never an exception out of the runner
            log.warning("forget_not_filed", error=type(exc).__name__)
            await asyncio.to_thread(self._lift, app, user, pending.get("suppression"))  # the preview's hiding
            return {"status": "error", "error": "the forget could not be filed; nothing was changed"}
        await asyncio.to_thread(self._narrow, app, user, chosen, pending.get("suppression"))
        # redaction narrows the same way: what was forgotten before, and what the user chose now (whole items of
        # any length, their numbers and quotes wherever they are echoed, and the details named)
        confirmed = merge(tool_context.state.get(CONFIRMED_KEY), live_patterns(self._secret, items, named))
        tool_context.state[CONFIRMED_KEY] = confirmed
        tool_context.state[PATTERNS_KEY] = confirmed
        if held:
            return {
                "status": "held",
                "request": request_id,
                "items": len(chosen),
                "message": "a legal hold keeps this user's data for now: the chosen items are hidden from recall "
                "and from the conversation, and will be deleted only once the hold is released",
            }
        return {"status": "forgetting", "request": request_id, "items": len(chosen)}

    def _held(self, app: str, user: str) -> bool:
        sk = subject_key(self._secret, app, user)
        return self._platform.requests.active_hold(sk) is not None

    def _lift(self, app: str, user: str, suppression: str | None) -> None:
        if suppression:
            self._platform.forgetting.lift(subject_key(self._secret, app, user), suppression)

    def _narrow(self, app: str, user: str, chosen: list[str], suppression: str | None) -> None:
        """Keep hidden only what the user chose (until the forget deletes it): the preview hid every
        candidate, and the ones the user did not choose come back to recall."""
        forgetting = self._platform.forgetting
        sk = subject_key(self._platform.config.subject_secret, app, user)
        forgetting.place(sk, app, "suppress", memory_ids=chosen)
        if suppression:
            forgetting.lift(sk, suppression)

    def _texts(self, app: str, user: str, ids: list[str]) -> list[str]:
        sk = subject_key(self._platform.config.subject_secret, app, user)
        with self._platform.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, content_sealed FROM memories WHERE subject_key = %s AND id = ANY(%s::uuid[])", (sk, ids)
            ).fetchall()
        return [self._platform.memory_store.decrypt_row(r[0], bytes(r[1])) for r in rows]

    def tools(self) -> list[FunctionTool]:
        from google.adk.tools.function_tool import FunctionTool

        return [FunctionTool(self.preview_forget), FunctionTool(self.forget_memories, require_confirmation=True)]


def redact_forgotten(secret: bytes) -> Callable[[CallbackContext, LlmRequest], LlmResponse | None]:
    """A ``before_model_callback``: every part of the request redacted of what this session forgot.

    Text parts and the system instruction lose what the user confirmed and, while they choose, what the
    preview offered (``PATTERNS_KEY``); tool calls' arguments, tool answers (the preview's own list) and code
    lose what the user confirmed (``CONFIRMED_KEY``): while they choose, the preview's list must still show
    them the items."""

    def callback(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
        state = callback_context.state
        text, settled = merge(state.get(PATTERNS_KEY), {}), merge(state.get(CONFIRMED_KEY), {})
        text = merge(text, settled)
        if any(text.values()):
            redact_request(secret, llm_request, text, settled)
        return None

    return callback


class ForgetRedaction(BasePlugin):
    """``redact_forgotten`` for every model call of a Runner's app (``App(plugins=[ForgetRedaction(secret)])``):
    an agent's own callback covers only that agent, and the session's other agents read the same events."""

    def __init__(self, secret: bytes, name: str = "forget_redaction") -> None:
        super().__init__(name=name)
        self._redact = redact_forgotten(secret)

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        return self._redact(callback_context, llm_request)

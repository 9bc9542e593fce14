"""Item forgetting at the store level (issue 16): tombstones checked on read and on write, suppress and
unsuppress, forget with derived rows and ``user:`` state, and the worked example of the design: a user moved
from Pune to Berlin and asks to forget the Pune address; the Pune office must stay, another user's Pune
address too, and a full re-ingest of the old sessions must not bring the address back.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from google.adk.events.event import Event
from google.adk.sessions import Session
from google.genai import types

from stores.forgetting.item_forget import ItemForgetter
from stores.ledgers.forget_tombstones import ForgetRefused
from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.forget_fixtures import ingest, make_sessions, recall
from tests.untouched import assert_untouched

pytestmark = pytest.mark.integration

APP = "forget-app"
MARCH = ["I live in Pune near the river.", "Our Pune office is on FC Road.", "Please deliver to my home."]
SEPTEMBER = ["I have moved to Berlin.", "My new home is in Berlin Mitte."]


async def _sessions(platform: Platform, user: str, turns: list[list[str]]) -> list[Session]:
    states = [{"user:default_city": "Pune"}, {"user:current_city": "Berlin"}]
    return await make_sessions(platform, APP, user, turns, states)


async def _ingest(platform: Platform, sessions: list[Session]) -> None:
    await ingest(platform, sessions)


async def _recall(platform: Platform, user: str, query: str) -> list[str]:
    return await recall(platform, APP, user, query)


def test_pune_to_berlin_forget_holds_through_reingest_and_spares_the_office_and_others(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user, other = f"mover-{run}@example.org", f"neighbour-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)

    async def scenario() -> None:
        sessions = await _sessions(platform, user, [MARCH, SEPTEMBER])
        others = await _sessions(platform, other, [["I live in Pune near the river."]])
        await _ingest(platform, [*sessions, *others])
        recalled = await _recall(platform, user, "where do I live")
        assert any("Pune near the river" in r for r in recalled)
        assert any("Berlin" in r for r in recalled)

        # the items: the episode and the fact extracted from it (resolved through the same search)
        rows = platform.memory_store.search(APP, user, "I live in Pune near the river", limit=20)
        pune = [r.id for r in rows if "live in Pune" in r.text]
        assert len(pune) == 1
        summary = platform.memory_store.summarise(APP, other, [uuid.UUID(pune[0])])  # a copy under someone else
        assert summary is not None
        before_other = snapshot(platform, APP, [other])

        # suppress hides it on read, keeps it, and is reversible
        hidden = platform.forgetting.place(sk, APP, "suppress", memory_ids=pune)
        assert not any("live in Pune" in r for r in await _recall(platform, user, "where do I live"))
        assert platform.memory_store.rows_of(APP, user)  # still held
        assert platform.forgetting.lift(sk, hidden)
        assert any("live in Pune" in r for r in await _recall(platform, user, "where do I live"))

        # forget: deleted with its embedding, derived rows removed and listed, user: state key removed
        forgetter = ItemForgetter(platform.pool, platform.forgetting)
        outcome = forgetter.forget(
            sk,
            APP,
            user,
            [*pune, str(uuid.uuid4())],  # an id that is no item of theirs is refused, never touched
            spans=["I live in Pune near the river"],
            state_keys=["user:default_city"],
            request_id=f"fr_{run}",
            tombstone_id=str(uuid.uuid4()),
        )
        assert outcome.items == 1
        assert str(summary) in outcome.derived_ids
        assert outcome.refused_ids == 1
        assert outcome.state_keys == 1
        remaining = await _recall(platform, user, "where do I live")
        assert not any("live in Pune" in r for r in remaining)
        assert any("Berlin" in r for r in remaining)
        assert any("Pune office" in r for r in await _recall(platform, user, "Pune office"))  # not over-forgotten

        # a full re-ingest of every old session does not bring it back (dropped on write, counted)
        dropped = platform.memory_service.refused["forgotten"]
        await _ingest(platform, sessions)
        assert platform.memory_service.refused["forgotten"] > dropped
        assert not any("live in Pune" in r for r in await _recall(platform, user, "where do I live"))
        assert any("Pune office" in r for r in await _recall(platform, user, "Pune office"))
        # a copy of the sentence arriving another way (a new id) is refused by its span
        late = Event(
            invocation_id="late",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="i LIVE in pune, near the river!")]),
        )
        await platform.memory_service.add_events_to_memory(app_name=APP, user_id=user, events=[late])
        assert not any("live in pune" in r.lower() for r in await _recall(platform, user, "where do I live"))

        # the other user: byte-identical, still recalls their own Pune address
        assert_untouched(before_other, snapshot(platform, APP, [other]), outcome.derived_ids)
        assert any("live in Pune" in r for r in await _recall(platform, other, "where do I live"))

        # the tombstone holds keys and hashes only
        with platform.pool.connection() as conn:
            raw = conn.execute("SELECT row_to_json(t)::text FROM forget_tombstones t WHERE subject_key = %s", (sk,))
            dump = " ".join(r[0] for r in raw.fetchall()).lower()
        assert "pune" not in dump
        assert user not in dump
        assert "default_city" not in dump

        # a retry changes nothing more
        again = forgetter.forget(
            sk, APP, user, pune, request_id=f"fr_{run}", tombstone_id=outcome.tombstone_id, spans=["x"]
        )
        assert again.items == 1
        assert again.derived == 1

    asyncio.run(scenario())


def test_a_forget_that_names_nothing_or_a_huge_span_is_refused(platform: Platform) -> None:
    sk = subject_key(platform.config.subject_secret, APP, "nobody@example.org")
    with pytest.raises(ForgetRefused, match="must name"):
        platform.forgetting.place(sk, APP, "forget")
    with pytest.raises(ForgetRefused, match="longer than"):
        platform.forgetting.place(sk, APP, "forget", spans=[" ".join(["word"] * 13)])
    with pytest.raises(ForgetRefused, match="unknown strength"):
        platform.forgetting.place(sk, APP, "obliterate", spans=["x"])
    assert platform.forgetting.live(sk) == []

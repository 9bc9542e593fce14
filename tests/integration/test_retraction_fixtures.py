"""Ten retraction fixtures (issue 16): multi-session histories with corrections and retractions. Each is
previewed, the person chooses the retracted items, the forget runs through ``ForgetWorkflow``, and probe
questions through the agent's recall path are checked after the forget and again after a full re-ingest of
every session: the retracted item never comes back, the correction and the unrelated look-alikes stay, and a
second user who said the same sentence keeps it."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

import pytest

from tests.forget_fixtures import ingest, make_sessions, recall
from tests.saga_harness import SagaHarness
from workers.forget_service import file_forget, forget_result, preview

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "retractions"


@dataclass(frozen=True)
class Fixture:
    name: str
    sessions: list[list[str]]
    about: str  # what the user asks to forget
    choose: str  # the person picks the previewed items holding this
    gone: str  # never recalled again
    stays: list[str] = field(default_factory=list)  # still recalled (the correction, look-alikes)
    probe: str = ""  # the question asked of recall (default: about)


FIXTURES = [
    Fixture(
        "moved from Pune to Berlin",
        [["I live in Pune near the river.", "Our Pune office is on FC Road."], ["I have moved to Berlin Mitte."]],
        "the Pune address",
        "live in Pune",
        "live in Pune",
        ["Pune office", "Berlin"],
        "where do I live in Pune or Berlin",
    ),
    Fixture(
        "a corrected phone number",
        [["My phone number is 555 0100."], ["Sorry, my phone number is 555 0199."]],
        "my old phone number 0100",
        "0100",
        "555 0100",
        ["555 0199"],
        "phone number",
    ),
    Fixture(
        "an allergy that was the brother's",
        [["I am allergic to peanuts."], ["My brother is the one allergic to peanuts, not me."]],
        "that I am allergic",
        "I am allergic",
        "I am allergic to peanuts",
        ["My brother is the one"],
        "allergic to peanuts",
    ),
    Fixture(
        "a child's name, the other child stays",
        [["My daughter is called Mia."], ["My son is called Leo."]],
        "my daughter's name",
        "daughter",
        "Mia",
        ["Leo"],
        "who is called Mia or Leo",
    ),
    Fixture(
        "a former employer; a parcel from it stays",
        [["I work at Acme Corp in sales."], ["Acme Corp sent me a parcel today."], ["Now I work at Globex."]],
        "that I work at Acme",
        "I work at Acme",
        "work at Acme",
        ["parcel", "Globex"],
        "where do I work Acme Globex",
    ),
    Fixture(
        "a birthday; a meeting on the same day stays",
        [["My birthday is on 4 March."], ["The budget meeting is on 4 March."]],
        "my birthday",
        "birthday",
        "birthday",
        ["budget meeting"],
        "what is on 4 March birthday meeting",
    ),
    Fixture(
        "a seat preference corrected",
        [["I prefer window seats on flights."], ["Actually I prefer aisle seats on flights."]],
        "the window seat preference",
        "window",
        "window seats",
        ["aisle seats"],
        "which seats on flights",
    ),
    Fixture(
        "an old billing address",
        [["Send invoices to billing at old example."], ["Send invoices to accounts at new example now."]],
        "the old billing address",
        "billing at old",
        "billing at old",
        ["accounts at new"],
        "where to send invoices",
    ),
    Fixture(
        "a diet that changed",
        [["I am vegetarian."], ["I eat fish now."]],
        "that I am vegetarian",
        "vegetarian",
        "vegetarian",
        ["fish"],
        "what do I eat vegetarian fish",
    ),
    Fixture(
        "a password hint said by mistake",
        [["My password hint is blue horse."], ["My favourite colour is blue."]],
        "my password hint",
        "password hint",
        "blue horse",
        ["favourite colour"],
        "blue horse password colour",
    ),
]


async def _holds(saga: SagaHarness, user: str, probe: str, text: str) -> bool:
    return any(text.lower() in r.lower() for r in await recall(saga.platform, APP, user, probe))


@pytest.mark.parametrize("fx", FIXTURES, ids=[f.name for f in FIXTURES])
async def test_a_retraction_is_forgotten_and_stays_forgotten_after_a_full_reingest(
    saga: SagaHarness, fx: Fixture
) -> None:
    platform = saga.platform
    run = uuid.uuid4().hex[:8]
    user, other = f"retract-{run}@example.org", f"bystander-{run}@example.org"
    sessions = await make_sessions(platform, APP, user, fx.sessions)
    await ingest(platform, sessions)
    await ingest(platform, await make_sessions(platform, APP, other, [fx.sessions[0]]))
    probe = fx.probe or fx.about
    assert await _holds(saga, user, probe, fx.gone), "the fixture's item must be recalled before the forget"

    found = await asyncio.to_thread(preview, platform, APP, user, fx.about)
    chosen = [c.memory_id for c in found.candidates if fx.choose.lower() in c.text.lower()]
    assert chosen, [c.text for c in found.candidates]
    filed = await file_forget(
        saga.client,
        platform,
        saga.settings,
        app_name=APP,
        user_id=user,
        strength="forget",
        memory_ids=chosen,
        spans=found.spans(chosen),
        about=fx.about,
    )
    result = await asyncio.wait_for(forget_result(saga.client, filed.request_id), 120)
    assert result.status == "completed", result

    for when in ("after the forget", "after a full re-ingest"):
        if when == "after a full re-ingest":
            await ingest(platform, sessions)
        assert not await _holds(saga, user, probe, fx.gone), (fx.name, when)
        for kept in fx.stays:
            assert await _holds(saga, user, f"{probe} {kept}", kept), (fx.name, when, kept)
        assert await _holds(saga, other, probe, fx.gone), (fx.name, when, "the other user's copy")

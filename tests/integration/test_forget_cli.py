"""``erasure forget`` and ``erasure unsuppress`` for staff, against the real stack (issue 16): a preview that
changes nothing, refusals that change nothing, a confirmed forget waited for with its verification, and a
suppression lifted."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from stores.privacy.identity import subject_key
from tests.forget_fixtures import ingest, make_sessions, recall
from tests.integration.test_cli import cli
from tests.saga_harness import SagaHarness

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-cli"


async def test_preview_then_confirm_then_unsuppress(saga: SagaHarness, temporal_env: WorkflowEnvironment) -> None:
    platform = saga.platform
    user = f"cli-forget-{uuid.uuid4().hex[:8]}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    turns = [["I live in Pune near the river.", "Our Pune office is on FC Road.", "I like filter coffee."]]
    await ingest(platform, await make_sessions(platform, APP, user, turns, [{"user:default_city": "Pune"}]))
    rows = platform.memory_store.rows_of(APP, user)

    # the preview: candidates numbered with ids and why they matched, state, notes; nothing changes
    code, out, err = await cli(saga, temporal_env, "forget", "--app", APP, "--user", user, "--about", "Pune address")
    assert code == 0, err
    assert "live in Pune" in out
    assert "Pune office" in out
    assert "state user:default_city = 'Pune'" in out
    assert "choose" in out
    assert "Nothing changed" in out
    assert platform.memory_store.rows_of(APP, user) == rows
    assert platform.forget_requests.of_subject(sk) == []

    # two candidates and no choice: refused, nothing filed
    code, _out, err = await cli(
        saga, temporal_env, "forget", "--app", APP, "--user", user, "--about", "Pune address", "--confirm"
    )
    assert code == 2
    assert "choose with --memory" in err
    code, _out, err = await cli(saga, temporal_env, "forget", "--app", APP, "--user", user)
    assert code == 2
    assert "say what to forget" in err
    assert platform.forget_requests.of_subject(sk) == []

    # the person chooses the home address: forgotten, verified twice, a receipt
    home = next(line.split()[1] for line in out.splitlines() if "live in Pune" in line)
    code, out, err = await cli(
        saga,
        temporal_env,
        "forget",
        "--app",
        APP,
        "--user",
        user,
        "--about",
        "Pune address",
        "--memory",
        home,
        "--state-key",
        "user:default_city",
        "--confirm",
        "--wait",
    )
    assert code == 0, err + out
    assert "completed: " in out
    assert "verification after_reingest: passed" in out
    assert "receipt sha256 " in out
    assert not any("live in Pune" in r for r in await recall(platform, APP, user, "where do I live"))
    assert any("Pune office" in r for r in await recall(platform, APP, user, "Pune office"))

    # suppress by id, then lift it
    coffee = next(r.id for r in platform.memory_store.search(APP, user, "filter coffee") if "coffee" in r.text)
    code, out, err = await cli(
        saga, temporal_env, "forget", "--app", APP, "--user", user, "--memory", coffee, "--strength", "suppress",
        "--confirm", "--wait",
    )  # fmt: skip
    assert code == 0, err + out
    tombstone = out.split("tombstone ", 1)[1].split(")", 1)[0]
    assert not any("coffee" in r for r in await recall(platform, APP, user, "filter coffee"))
    code, out, _ = await cli(saga, temporal_env, "unsuppress", "--app", APP, "--user", user, "--tombstone", tombstone)
    assert code == 0
    assert "lifted" in out
    assert any("coffee" in r for r in await recall(platform, APP, user, "filter coffee"))
    code, out, _ = await cli(saga, temporal_env, "unsuppress", "--app", APP, "--user", user, "--tombstone", tombstone)
    assert code == 1  # once only; a forget tombstone is never lifted

    # issue 28, item 16: a forget can be followed by its id; --session never switches strength silently
    filed_id = next(f.request_id for f in platform.forget_requests.of_subject(sk) if f.strength == "forget")
    code, out, err = await cli(saga, temporal_env, "status", filed_id)
    assert code == 0, err
    assert f"forget {filed_id}" in out
    assert "state completed" in out
    code, _out, err = await cli(
        saga, temporal_env, "forget", "--app", APP, "--user", user, "--session", "s-1", "--strength", "suppress"
    )
    assert code == 2
    assert "--strength does not apply" in err

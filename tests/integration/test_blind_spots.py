"""Blind spots of the verifier, the sweeps and the books (issue 39, item 8), against the real stack; each
test fails on the old code.

- a request that ends ``verification_failed`` deleted data: it is handed to the physical job like any other;
- one configuration route for every store: ``ERASURE_QDRANT_PATH``, which the guide says turns the Qdrant
  store on, passes the settings validation ``erasure worker`` runs and reaches the Qdrant store;
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pytest

from stores.books import physical_pending
from stores.books.requests import RequestStore
from stores.platform import Platform
from tests.adapter_wrap import wired
from tests.integration.test_verifier_trust import DropsErasedSessions, erase_with
from tests.saga_harness import SagaHarness
from workers.errors import ConfigError
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform

pytestmark = [pytest.mark.integration]
aio = pytest.mark.asyncio(loop_scope="session")

APP = "blind-spots-app"


@aio
async def test_a_request_that_fails_verification_is_handed_to_the_physical_job(saga: SagaHarness) -> None:
    """Its steps deleted the user's rows (the memory step counted them) but a check failed: the receipt said
    ``physical: not_needed`` and the books never held it, so no physical pass was ever owed for those rows."""
    (user,) = user_ids(1, 3981, prefix="blind")
    await saga.seed(APP, [user])
    config = saga.platform.config

    class Planted(Platform):
        @cached_property
        def requests(self) -> RequestStore:
            return DropsErasedSessions(self.pool, config.subject_secret)

    planted = wired(Planted(config))  # loses the sessions step's record: the sessions check fails closed
    try:
        result = await erase_with(saga, planted, APP, user)
    finally:
        planted.close()
    assert result.status == "verification_failed"
    memory = next(s for s in result.steps if s.name == "memory")
    assert sum(memory.counts.values()) > 0  # it deleted data
    body = saga.receipt_body(result.request_id)
    assert body["physical"]["state"] == "pending", body["physical"]
    status = physical_pending.status(saga.platform.pool, result.request_id)
    assert status is not None
    assert status.state == "pending"
    run = await saga.physical([result.request_id])  # and the job covers it: an attestation is signed
    assert run.attested == 1, run


def test_the_documented_qdrant_setting_turns_the_qdrant_store_on(
    local_stack: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adding-a-store.md: ``ERASURE_QDRANT_PATH`` names the Qdrant store's directory. Before, the worker's
    settings validation refused it (``unknown setting: ERASURE_QDRANT_PATH``) and nothing started."""
    for name, value in local_stack.env().items():
        monkeypatch.setenv(name, value)
    directory = tmp_path / "qdrant"
    monkeypatch.setenv("ERASURE_QDRANT_PATH", str(directory))
    settings = Settings.from_env()  # what ``erasure worker`` (every command) runs first
    platform = build_platform(settings)
    try:
        assert "qdrant_memory" in platform.adapters.names, platform.adapters.not_configured
        assert platform.adapters.get("qdrant_memory").store.path == str(directory)  # type: ignore[attr-defined]
    finally:
        platform.close()
    monkeypatch.setenv("ERASURE_QDRANT_PTH", str(directory))  # a misspelt store setting is still refused
    with pytest.raises(ConfigError, match=r"ERASURE_QDRANT_PTH \(did you mean ERASURE_QDRANT_PATH\?\)"):
        Settings.from_env()

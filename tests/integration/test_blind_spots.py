"""Blind spots of the verifier, the sweeps and the books (issue 39, item 8), against the real stack; each
test fails on the old code.

- a request that ends ``verification_failed`` deleted data: it is handed to the physical job like any other;
"""

from __future__ import annotations

from functools import cached_property

import pytest

from stores.books import physical_pending
from stores.books.requests import RequestStore
from stores.platform import Platform
from tests.adapter_wrap import wired
from tests.integration.test_verifier_trust import DropsErasedSessions, erase_with
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

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

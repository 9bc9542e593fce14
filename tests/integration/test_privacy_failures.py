"""Issue 12: the failure paths leak nothing either: a failed saga, a retried step and a failed verification.

A store whose error message echoes the raw user id (psycopg's DataError does that with the value it could
not parse) must not carry the id into Temporal history (decoded, as an operator with the codec sees it),
the worker's log (ours and the SDK's standard-library lines), the receipt or our tables.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from temporalio.client import WorkflowFailureError

from stores.infra.errors import InvalidIdentifier
from stores.platform import Platform
from stores.sessions.adapter import SessionsAdapter
from stores.sessions.adk_tables import SessionCounts, SessionStore
from tests.adapter_wrap import wired
from tests.integration.test_privacy import history_texts, table_text
from tests.saga_harness import SagaHarness
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import document_bytes
from workers.local_secrets import load_secrets
from workers.logging_setup import configure_logging
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


class EchoingSessions(SessionStore):
    """Fails like a careless store: the message names the user id it was given."""

    mode = "non-retryable"
    attempts = 0

    def erase_sessions(self, app_name: str, user_id: str, session_ids: Sequence[str]) -> SessionCounts:
        EchoingSessions.attempts += 1
        if self.mode == "non-retryable":
            raise InvalidIdentifier(f"cannot erase sessions of {user_id}")
        if EchoingSessions.attempts == 1:
            raise psycopg.errors.DataError(f'invalid input syntax for type uuid: "{user_id}"')
        return super().erase_sessions(app_name, user_id, session_ids)


class KeepsUserState(SessionStore):
    def erase_user_state(self, app_name: str, user_id: str) -> SessionCounts:
        return SessionCounts()


def broken(base: Platform, sessions: type[SessionStore]) -> Platform:
    """A platform of its own whose sessions adapter (its step and its second sweep) erases through ``sessions``."""
    platform = Platform(base.config)
    adapter = SessionsAdapter(platform.store_context)
    adapter.sessions = sessions(platform.pool, platform.config.subject_secret)
    return wired(platform, adapter)


async def _run(saga: SagaHarness, platform: Platform, app: str, user: str) -> tuple[str, str]:
    settings = saga.settings.model_copy(update={"task_queue": f"pii-fail-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, platform, settings)
    async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
        filed = await harness.file(app, user)
        handle = saga.client.get_workflow_handle(filed.workflow_id)
        with contextlib.suppress(WorkflowFailureError):  # a failed saga raises ErasureFailed
            await harness.result(filed.request_id)
        desc = await handle.describe()
    return filed.request_id, desc.status.name if desc.status else ""


def _assert_absent(secrets: list[str], places: dict[str, str]) -> None:
    for secret in secrets:
        for where, text in places.items():
            assert secret not in text, f"{secret!r} found in {where}"


async def test_failed_and_retried_steps_leak_no_raw_id(saga: SagaHarness, capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")
    app = "pii-fail"
    users = user_ids(2, 131, prefix="piifail")
    await saga.seed(app, users, "small", 131)
    capfd.readouterr()

    EchoingSessions.mode, EchoingSessions.attempts = "non-retryable", 0
    platform = broken(saga.platform, EchoingSessions)
    try:
        failed_id, status = await _run(saga, platform, app, users[0])
    finally:
        platform.close()
    assert status.endswith("FAILED")
    assert saga.platform.requests.get(failed_id).state == "failed"

    EchoingSessions.mode, EchoingSessions.attempts = "retry-once", 0
    platform = broken(saga.platform, EchoingSessions)
    try:
        retried_id, status = await _run(saga, platform, app, users[1])
    finally:
        platform.close()
    assert status.endswith("COMPLETED")
    assert EchoingSessions.attempts >= 2  # the first attempt failed with the id in its message

    logs = capfd.readouterr()
    _raw, decoded, _payloads = await history_texts(
        saga.client, [f"erasure-{failed_id}", f"erasure-{retried_id}", f"verify-{retried_id}-final"]
    )
    assert "cannot erase sessions of" in decoded  # the failure is there, masked
    _assert_absent(
        users,
        {
            "history (decoded)": decoded,
            "worker log": logs.out + logs.err,
            "tables": table_text(saga.platform),
        },
    )


async def test_failed_verification_leaks_no_raw_id_or_canary(
    saga: SagaHarness, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json")
    app = "pii-verify-fail"
    users = user_ids(2, 132, prefix="piiverify")
    report = await saga.seed(app, users, "small", 132)
    capfd.readouterr()
    platform = broken(saga.platform, KeepsUserState)
    try:
        request_id, _status = await _run(saga, platform, app, users[0])
    finally:
        platform.close()
    assert saga.platform.requests.get(request_id).state == "verification_failed"
    logs = capfd.readouterr()
    _raw, decoded, _payloads = await history_texts(saga.client, [f"erasure-{request_id}", f"verify-{request_id}-final"])
    document = load_receipt(saga.platform, request_id)
    assert document is not None
    places: dict[str, Any] = {
        "history (decoded)": decoded,
        "worker log": logs.out + logs.err,
        "receipt": document_bytes(document).decode(),
        "tables": table_text(saga.platform),
    }
    _assert_absent([users[0], *report.users[0].signature_words], places)

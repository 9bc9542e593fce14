"""Issue 12, item 13: the orchestrator keeps no personal data it does not need.

The ciphertext sample and the canary digests serve only the request's own verification: they are
destroyed when it finishes (not merely flagged). Free text staff type (the request's reason and requester,
a hold's reason and actor) may name people: it is sealed at rest and never copied into the receipt.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import document_bytes
from workers.service import progress, signal_hold_change
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyInput, VerifyResult

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NAMES = ("Jane Roe-141", "Tom Reed-141", "Rita Moss-141")


def _raw_rows(saga: SagaHarness, subject: str) -> str:
    with saga.platform.pool.connection() as conn:
        rows = [
            *conn.execute("SELECT * FROM erasure_requests WHERE subject_key = %s", (subject,)).fetchall(),
            *conn.execute("SELECT * FROM legal_holds WHERE subject_key = %s", (subject,)).fetchall(),
            *conn.execute("SELECT * FROM hold_events WHERE subject_key = %s", (subject,)).fetchall(),
        ]
    return "\n".join(repr(r) for r in rows)


async def test_captures_are_destroyed_and_free_text_is_sealed(saga: SagaHarness) -> None:
    app = "keeps-little"
    users = user_ids(2, 141, prefix="keeps")
    await saga.seed(app, users, "small", 141)
    sk = subject_key(saga.platform.config.subject_secret, app, users[0])
    requests = saga.platform.requests
    requests.place_hold(sk, app, f"litigation hold for {NAMES[0]}", f"counsel {NAMES[2]}")
    filed = await saga.file(app, users[0], reason=f"Art. 17 request from {NAMES[0]}", requested_by=NAMES[1])

    for _ in range(600):
        current = await progress(saga.client, filed.request_id)
        if current is not None and current.on_hold:
            break
        await asyncio.sleep(0.1)
    assert current is not None
    assert current.on_hold
    during = requests.record(filed.request_id)
    requests.release_hold(sk, f"released: {NAMES[0]} settled", f"counsel {NAMES[2]}")
    await signal_hold_change(saga.client, saga.platform, sk)
    result = await saga.result(filed.request_id)
    assert result.status == "completed"

    record = requests.record(filed.request_id)
    assert during.canaries is not None  # captured while it ran ...
    assert record.canaries is None  # ... and destroyed at the end, not merely flagged
    assert record.canaries_destroyed
    assert record.ciphertext_sample is None
    assert record.ciphertext_sample_destroyed

    stored = _raw_rows(saga, sk)
    document = load_receipt(saga.platform, filed.request_id)
    assert document is not None
    receipt = document_bytes(document).decode()
    for name in NAMES:
        assert name not in stored, f"{name!r} stored in clear"
        assert name not in receipt, f"{name!r} copied into the receipt"
    # who is allowed to read them still can, through the store
    row = requests.get(filed.request_id)
    assert requests.requested(row) == (f"Art. 17 request from {NAMES[0]}", NAMES[1])
    history = requests.hold_history(sk)
    assert [(h["action"], h["reason"], h["actor"]) for h in history] == [
        ("placed", f"litigation hold for {NAMES[0]}", f"counsel {NAMES[2]}"),
        ("released", f"released: {NAMES[0]} settled", f"counsel {NAMES[2]}"),
    ]
    assert [h["action"] for h in saga.receipt_body(filed.request_id)["holds"]] == ["placed", "released"]

    # re-verification after completion still runs every check, and says what it can no longer run
    again = await asyncio.wait_for(
        saga.client.execute_workflow(
            VERIFIER_WORKFLOW,
            VerifyInput(filed.request_id, sk, app, "final"),
            id=f"reverify-{filed.request_id}-{uuid.uuid4().hex[:6]}",
            task_queue=saga.settings.task_queue,
            result_type=VerifyResult,
        ),
        120,
    )
    assert again.passed, again
    memory = next(c for c in again.checks if c.check == "memory")
    assert "canary scan not run" in memory.detail
    keys = next(c for c in again.checks if c.check == "keys")
    assert "destroyed after completion" in keys.detail


async def test_session_ids_are_never_kept_in_clear(saga: SagaHarness) -> None:
    """Tombstones, the request record and the tombstone journal name sessions by keyed hash (sealed copies
    serve the sweeps' lookups); the fence and re-ingest refusal still work through the hash."""
    app = "keeps-no-session-ids"
    users = user_ids(2, 142, prefix="nosid")
    report = await saga.seed(app, users, "small", 142)
    session_ids = report.users[0].session_ids
    assert session_ids
    result = await saga.erase(app, users[0])
    assert result.status == "completed"
    sk = subject_key(saga.platform.config.subject_secret, app, users[0])
    with saga.platform.pool.connection() as conn:
        tombstones = conn.execute("SELECT * FROM session_tombstones WHERE subject_key = %s", (sk,)).fetchall()
        record = conn.execute(
            "SELECT record::text FROM erasure_requests WHERE request_id = %s", (result.request_id,)
        ).fetchone()
    journal = saga.platform.s3.get_object(
        Bucket=saga.platform.config.receipt_bucket, Key=f"tombstones/{result.request_id}.json"
    )["Body"].read()
    stored = "\n".join([repr(tombstones), repr(record), journal.decode()])
    assert len(tombstones) == len(session_ids)
    for sid in session_ids:
        assert sid not in stored, "a session id is kept in clear"
        assert saga.platform.ledger.session_erased(sk, sid)  # matched by its keyed hash
    assert sorted(saga.platform.ledger.sessions_of(sk)) == sorted(session_ids)  # the sweeps can still open them


async def test_tombstones_written_in_clear_before_are_rekeyed(saga: SagaHarness) -> None:
    sk = subject_key(saga.platform.config.subject_secret, "legacy-tombstones", "someone-143")
    with saga.platform.pool.connection() as conn:
        conn.execute(
            "INSERT INTO session_tombstones (subject_key, session_id, app_name, request_id) "
            "VALUES (%s, 'legacy-session-143', 'legacy-tombstones', 'er_legacy')",
            (sk,),
        )
    assert saga.platform.ledger.rekey_legacy() >= 1
    assert saga.platform.ledger.rekey_legacy() == 0  # idempotent
    with saga.platform.pool.connection() as conn:
        rows = conn.execute("SELECT session_id, session_digest FROM session_tombstones WHERE subject_key = %s", (sk,))
        [(clear, digest)] = rows.fetchall()
    assert clear is None
    assert digest.startswith("sd_")
    assert saga.platform.ledger.session_erased(sk, "legacy-session-143")
    assert saga.platform.ledger.sessions_of(sk) == ["legacy-session-143"]

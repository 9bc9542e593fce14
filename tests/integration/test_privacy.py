"""The orchestrator leaks nothing: Temporal history (raw and decoded), worker logs, receipt and our tables."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from stores.platform import Platform
from tests.saga_harness import SagaHarness
from tests.worker_process import WorkerProcess
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import document_bytes
from workers.codec import ENCODING, EncryptionCodec
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import SAGA_STEPS
from workflows.erasure.patches import DEPRECATED

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def payloads_in(message: Message) -> list[Payload]:
    """Every Payload anywhere inside a protobuf message."""
    found: list[Payload] = []
    if isinstance(message, Payload):
        return [message]
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            values = list(value.values())
        elif descriptor.is_repeated:
            values = list(value)
        else:
            values = [value]
        for item in values:
            if isinstance(item, Message):
                found += payloads_in(item)
    return found


async def history_texts(client: Client, workflow_ids: list[str]) -> tuple[bytes, str, list[Payload]]:
    raw = b""
    decoded: list[str] = []
    payloads: list[Payload] = []
    for wid in workflow_ids:
        history: WorkflowHistory = await client.get_workflow_handle(wid).fetch_history()
        for event in history.events:
            raw += event.SerializeToString()
            found = payloads_in(event)
            payloads += found
            codec = client.data_converter.payload_codec
            assert isinstance(codec, EncryptionCodec)
            for p in await codec.lenient().decode(found):  # a whole history: clear search attributes too
                decoded.append(p.data.decode("utf-8", errors="replace"))
                decoded.append(str(dict(p.metadata)))
        decoded.append(history.to_json())
    return raw, "\n".join(decoded), payloads


def table_text(platform: Platform) -> str:
    with platform.pool.connection() as conn:
        rows = []
        for table in ("erasure_requests", "user_tombstones", "session_tombstones", "erasure_ledger", "receipts"):
            rows += [repr(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()]
    return "\n".join(rows)


async def test_no_personal_data_anywhere_in_the_orchestration(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, local_stack: Settings, tmp_path: Path
) -> None:
    app = "privacy-app"
    users = user_ids(2, 41, prefix="privacy")
    target = users[0]
    report = await saga.seed(app, users, "typical", 41)
    canaries = report.users[0].signature_words
    assert canaries
    queue = f"privacy-{uuid.uuid4().hex[:8]}"
    settings = local_stack.model_copy(update={"task_queue": queue})
    worker = WorkerProcess(
        settings, temporal_env.client.service_client.config.target_host, tmp_path / "worker.log"
    ).start()
    try:
        harness = SagaHarness(saga.client, saga.platform, settings)
        filed = await harness.file(app, target, delay=1)
        result = await harness.result(filed.request_id)
        assert result.status == "completed"
    finally:
        assert worker.stop() == 0  # graceful shutdown on SIGTERM
    ids = [filed.workflow_id, f"verify-{filed.request_id}-main", f"verify-{filed.request_id}-final"]
    raw, decoded, payloads = await history_texts(saga.client, ids)
    assert payloads
    # only search attributes (the server indexes them: status, stage, due date, and the SDK's own
    # TemporalChangeVersion) and the SDK's patch markers stay in clear; none holds anything personal
    clear = [p for p in payloads if p.metadata.get("encoding") != ENCODING]
    assert clear
    patches = {
        json.dumps({"id": patch_id, "deprecated": True}, separators=(",", ":")).encode() for patch_id in DEPRECATED
    }
    odd = [
        (dict(p.metadata), p.data[:100])
        for p in clear
        if p.metadata.get("type") not in (b"Keyword", b"Datetime", b"KeywordList") and p.data not in patches
    ]
    assert not odd, odd
    keywords = {p.data.decode().strip('"') for p in clear if p.metadata.get("type") == b"Keyword"}
    keywords |= {k for p in clear if p.metadata.get("type") == b"KeywordList" for k in json.loads(p.data)}
    allowed = {
        "received",
        "running",
        "completed",
        "verify_final",
        "finish",
        "receipt",
        "done",
        *DEPRECATED,
    }
    # stage names: the saga's own steps and the plan's stores (adapter names, never personal)
    assert keywords <= set(SAGA_STEPS) | set(saga.platform.adapters.names) | allowed
    log = (tmp_path / "worker.log").read_text()
    assert "worker_started" in log
    document = load_receipt(saga.platform, filed.request_id)
    assert document is not None
    receipt = document_bytes(document).decode()
    tables = table_text(saga.platform)
    places: dict[str, Any] = {
        "history (raw)": raw.decode("utf-8", errors="replace"),
        "history (decoded)": decoded,
        "worker log": log,
        "receipt": receipt,
        "tombstone and request tables": tables,
    }
    for secret in [target, *canaries]:
        for where, text in places.items():
            assert secret not in text, f"{secret!r} found in {where}"
    # and the subject key is what names the user everywhere
    assert filed.subject_key in receipt
    assert filed.subject_key in decoded

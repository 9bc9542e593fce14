"""Wrapping-key epochs on the real local stack (issue 30, "The key must be gone, not only its row").

Two users get data keys under a managed epoch (a first run of the key-epoch job opens epoch N), each seals a
blob; one is shredded; a second run (forced, backup retention 0) opens epoch N+1, re-wraps the control's key
under it, retires epoch N and schedules its KMS key for deletion, rewrites ``data_keys`` (VACUUM FULL) and
switches the WAL. Then: the control still decrypts; epoch N's KMS key is PendingDeletion and refuses the
erased user's old wrapped key (every copy of it: a backup, the WAL); a raw scan of Postgres's data directory
(heap, indexes, TOAST, ``pg_wal``) finds the erased user's wrapped-key bytes before the job and none in the
live relation files after, while it finds the control's current wrapped key (the scan sees what is there).
What ``pg_wal`` still holds after the job is reported (``-s``) and judged by the bound.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from stores.infra.errors import DataKeyShredded
from stores.platform import Platform
from stores.privacy.key_epochs import EpochPolicy
from tests.raw_scan import Pattern, Scan, scan
from tests.saga_harness import SagaHarness
from workers.settings import Settings
from workers.stack.parts import PostgresPart
from workflows.contracts.key_epochs import KEY_EPOCH_WORKFLOW, KeyEpochInput, KeyEpochProgress, KeyEpochResult

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

TARGET, CONTROL = "target", "control"


def wrapped(platform: Platform, subject: str) -> tuple[bytes, str, int | None]:
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT wrapped_key, kms_key_id, epoch FROM data_keys WHERE subject_key = %s", (subject,)
        ).fetchone()
    assert row is not None
    return bytes(row[0]), str(row[1]), row[2]


def key_state(platform: Platform, kms_key: str) -> str:
    return str(platform.kms.describe_key(KeyId=kms_key)["KeyMetadata"].get("KeyState"))


def raw_scan(platform: Platform, data_dir: Path, needles: dict[str, bytes]) -> Scan:
    with platform.pool.connection() as conn:
        conn.execute("CHECKPOINT")  # dirty pages to the files: the scan sees what the database holds
    return scan({"postgres": [data_dir]}, [Pattern(label, "raw", data) for label, data in needles.items()])


def places(found: Scan, needle: str) -> dict[str, list[str]]:
    """Where a needle was found, split into the live relation files (heap, index, TOAST) and the WAL."""
    hits = sorted(found.of(needle))
    return {
        "relations": [h for h in hits if h.startswith(("postgres:base/", "postgres:global/"))],
        "wal": [h for h in hits if h.startswith("postgres:pg_wal/")],
        "other": [h for h in hits if not h.startswith(("postgres:base/", "postgres:global/", "postgres:pg_wal/"))],
    }


async def run_job(saga: SagaHarness, **kwargs: object) -> tuple[KeyEpochResult, KeyEpochProgress]:
    handle = await saga.client.start_workflow(
        KEY_EPOCH_WORKFLOW,
        KeyEpochInput(**kwargs),  # type: ignore[arg-type]
        id=f"key-epoch-test-{uuid.uuid4().hex[:8]}",
        task_queue=saga.settings.task_queue,
        result_type=KeyEpochResult,
    )
    result = await asyncio.wait_for(handle.result(), 120)
    progress = await handle.query("progress", result_type=KeyEpochProgress)
    return result, progress


async def test_rotation_makes_the_shredded_key_unwrappable_and_drops_it_from_the_live_files(
    saga: SagaHarness, platform: Platform, local_stack: Settings
) -> None:
    keys = platform.keys
    # a first run opens a managed epoch: from now on data keys are wrapped under it
    first, _ = await run_job(saga, force=True, retention_days=0.0, rewrite="off")
    assert first.status == "done"
    assert first.opened
    old_epoch = first.epoch
    subjects = {role: f"sk-key-epochs-{role}-{uuid.uuid4().hex}" for role in (TARGET, CONTROL)}
    blobs = {role: keys.encrypt(sk, f"{role} secret".encode())[1] for role, sk in subjects.items()}
    before = {role: wrapped(platform, sk) for role, sk in subjects.items()}
    old_kms = before[TARGET][1]
    assert before[TARGET][2] == old_epoch
    assert before[CONTROL][2] == old_epoch
    assert key_state(platform, old_kms) == "Enabled"

    data_dir = PostgresPart(local_stack).data_dir
    needles = {"target/wrapped": before[TARGET][0], "control/wrapped-old": before[CONTROL][0]}
    scanned_before = await asyncio.to_thread(raw_scan, platform, data_dir, needles)
    target_before = places(scanned_before, "target/wrapped")
    assert target_before["relations"], "the scan must see the erased user's wrapped key in the heap before the job"

    shredded_at = datetime.now(UTC)
    assert keys.shred(subjects[TARGET]) == 1
    result, progress = await run_job(saga, force=True, retention_days=0.0, rewrite="full")

    assert result.status == "done"
    assert result.opened
    assert result.epoch == old_epoch + 1
    assert progress.status == "done"
    assert progress.epoch == result.epoch
    assert result.rewrapped >= 1  # the control's key (and any other test's keys)
    assert old_epoch in result.retired
    assert old_epoch in result.deletions.scheduled
    # (a) the control still decrypts, under the new epoch
    after_control = wrapped(platform, subjects[CONTROL])
    assert after_control[2] == result.epoch
    assert after_control[1] != old_kms
    assert keys.decrypt(blobs[CONTROL]) == b"control secret"
    # (b) the old epoch's KMS key is scheduled for deletion (retention 0 passed) and refuses every old copy
    assert key_state(platform, old_kms) == "PendingDeletion"
    for role in (TARGET, CONTROL):
        with pytest.raises(ClientError, match="KMSInvalidStateException"):
            platform.kms.decrypt(CiphertextBlob=before[role][0], KeyId=old_kms)
    with pytest.raises(DataKeyShredded):
        keys.decrypt(blobs[TARGET])
    # (c) the live files no longer hold the erased user's wrapped key; the control's current one is found
    needles["control/wrapped-new"] = after_control[0]
    scanned_after = await asyncio.to_thread(raw_scan, platform, data_dir, needles)
    target_after = places(scanned_after, "target/wrapped")
    control_after = places(scanned_after, "control/wrapped-new")
    print(
        "\nkey-epoch raw scan:",
        f"compaction={result.compaction}",
        f"before: target relations={len(target_before['relations'])} wal={len(target_before['wal'])};",
        f"after: target relations={len(target_after['relations'])} wal={len(target_after['wal'])}",
        f"other={len(target_after['other'])}; control-new relations={len(control_after['relations'])}",
        f"wal={len(control_after['wal'])}; files={scanned_after.files} bytes={scanned_after.size}",
    )
    assert control_after["relations"], "the scan must see the control's current wrapped key in the heap"
    assert not target_after["relations"], target_after
    assert result.compaction == {"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}
    if target_after["wal"]:
        # pg_wal recycles old segments (renamed, not overwritten) up to min_wal_size: the bytes stay there
        # until overwritten, wrapped under a KMS key that now refuses use. The bound covers them.
        policy = EpochPolicy(timedelta(days=30), timedelta(days=35))
        assert policy.unwrappable_by(shredded_at) == shredded_at + timedelta(days=30 + 35 + 2)
        assert key_state(platform, old_kms) == "PendingDeletion"

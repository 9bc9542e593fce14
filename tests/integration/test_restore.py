"""Restore from backup: old copies come back, ``erasure replay-tombstones`` removes them again.

The backup is a real ``pg_dump`` of the platform tables (data only, restored on top of the live database
so that rows created after the backup stay) and a copy of the artifact objects. Before the replay the
restore also rolls the tombstone tables back to their pre-erasure state: the journal in S3 must be enough.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.artifacts.bucket import user_prefix
from stores.infra.errors import DataKeyShredded
from stores.operations.fingerprint import user_snapshot
from stores.operations.restore import replay_tombstones
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

TABLES = ["sessions", "events", "user_states", "memories", "log_segments", "log_subject_index", "data_keys"]


def pg_bin(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


async def test_replaying_tombstones_after_a_restore(saga: SagaHarness, tmp_path: Path) -> None:
    platform = saga.platform
    app = "restore-app"
    erased, control = user_ids(2, 91, prefix="restore")
    await saga.seed(app, [erased, control], "small", 91)
    sk = subject_key(platform.config.subject_secret, app, erased)
    bucket = platform.config.artifact_bucket

    # --- backup: pg_dump of the platform tables and a copy of the user's artifact objects
    dump = tmp_path / "platform.sql"
    await asyncio.to_thread(
        subprocess.run,
        [pg_bin("pg_dump"), "--data-only", "--inserts", "--on-conflict-do-nothing", "-f", str(dump)]
        + [f"--table={t}" for t in TABLES]
        + [platform.config.postgres_url],
        check=True,
    )
    backup_objects: dict[str, bytes] = {}
    for page in platform.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=user_prefix(app, sk)):
        for obj in page.get("Contents", []):
            backup_objects[obj["Key"]] = platform.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    assert backup_objects

    # --- the erasure, then the user comes back and builds new data
    result = await saga.erase(app, erased)
    assert result.status == "completed"
    new = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="back again, my new plan")]))
    await platform.memory_service.add_memory(app_name=app, user_id=erased, memories=[new], custom_metadata=PURPOSE)
    adk = platform.adk_session_service()
    try:
        await adk.create_session(app_name=app, user_id=erased, session_id="after-return")
    finally:
        await adk.db_engine.dispose()
    returning = await asyncio.to_thread(user_snapshot, platform, app, erased)
    control_before = await asyncio.to_thread(user_snapshot, platform, app, control)

    # --- restore: tombstones rolled back, backup rows and objects back on top of live data
    with platform.pool.connection() as conn:
        conn.execute("DELETE FROM session_tombstones WHERE subject_key = %s", (sk,))
        conn.execute("DELETE FROM erasure_ledger WHERE subject_key = %s", (sk,))
    psql = [pg_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), platform.config.postgres_url]
    await asyncio.to_thread(subprocess.run, psql, check=True)
    for key, body in backup_objects.items():
        platform.s3.put_object(Bucket=bucket, Key=key, Body=body)
    restored = await asyncio.to_thread(user_snapshot, platform, app, erased)
    assert restored["counts"]["events"] > 0  # the restore really brought the erased user back
    assert restored["counts"]["memories"] > returning["counts"]["memories"]

    # --- replay the tombstone journal
    entries, totals = await asyncio.to_thread(replay_tombstones, platform)
    assert entries >= 1
    # the journal holds every erasure of the test session, so totals cover other subjects too (e.g. the
    # planted "current versions only" erasure leaves old versions that the replay now removes)
    assert totals["events"] >= restored["counts"]["events"]
    assert totals["restored_artifacts"] >= len(backup_objects)
    after = await asyncio.to_thread(user_snapshot, platform, app, erased)
    assert after == returning  # exactly the returning user's new data is left
    assert platform.sessions.session_ids(app, erased) == ["after-return"]
    assert len(platform.ledger.sessions_of(sk)) == totals["tombstones_recreated"] == 2
    # the backup's own copies stay unreadable: the data key they were sealed with is gone for good
    key, blob = next(iter(backup_objects.items()))
    with pytest.raises(DataKeyShredded):
        platform.keys.decrypt(blob, key.encode())
    assert await asyncio.to_thread(user_snapshot, platform, app, control) == control_before
    # and replaying again changes nothing
    _, again = await asyncio.to_thread(replay_tombstones, platform)
    assert not any(v for k, v in again.items() if k != "tombstones_recreated")

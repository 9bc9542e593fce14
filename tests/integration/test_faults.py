"""Store faults mid-erasure on a stack of its own: Postgres restarted, S3 away for 30 s, KMS down,
the Temporal dev server stopped and restarted (its SQLite file keeps state). Each erasure completes
once the part is back, with the retries visible in the workflow history, and nothing is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from psycopg_pool import PoolTimeout
from temporalio.client import Client

from stores.operations.database import prepare_database
from stores.operations.fingerprint import user_snapshot
from stores.platform import Platform
from tests.saga_harness import SagaHarness
from tests.stack_fixture import make_test_settings
from tests.untouched import assert_untouched
from tests.worker_process import WorkerProcess
from workers.settings import Settings
from workers.stack import launcher
from workers.stack.parts import KmsPart, Part, PostgresPart, S3Part, TemporalPart, all_parts
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.temporal_client import connect
from workers.wiring import build_platform
from workflows.contracts.erasure import activity_label, workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


class FaultStack:
    def __init__(self, settings: Settings, platform: Platform, client: Client, log_dir: Path) -> None:
        self.settings, self.platform, self.client, self.log_dir = settings, platform, client, log_dir
        self.harness = SagaHarness(client, platform, settings)

    def part(self, kind: type[Part]) -> Part:
        return next(p for p in all_parts(self.settings) if isinstance(p, kind))

    async def retried_activities(self, request_id: str) -> list[tuple[str, int]]:
        names: dict[int, str] = {}
        retried = []
        history = await self.client.get_workflow_handle(workflow_id(request_id)).fetch_history()
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                attrs_s = event.activity_task_scheduled_event_attributes
                names[event.event_id] = activity_label(attrs_s.activity_type.name, attrs_s.activity_id)
            if event.HasField("activity_task_started_event_attributes"):
                attrs = event.activity_task_started_event_attributes
                if attrs.attempt > 1:
                    retried.append((names[attrs.scheduled_event_id], attrs.attempt))
        return retried


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def faults(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FaultStack]:
    settings = make_test_settings(tmp_path_factory.mktemp("faults"))
    quiet: Callable[[str], None] = lambda _m: None  # noqa: E731
    # the launcher's health probes use asyncio.run: keep them off this test's running loop
    await asyncio.to_thread(launcher.up, settings, quiet, all_parts(settings))
    try:
        await asyncio.to_thread(prepare_database, settings.postgres_url)
        await asyncio.to_thread(launcher.ensure_buckets, settings)
        await launcher._register_search_attributes(settings)
        platform = build_platform(settings, key_cache_ttl=0.0)
        client = await connect(settings)
        log_dir = tmp_path_factory.mktemp("fault-logs")
        worker = WorkerProcess(
            settings, settings.temporal_target, log_dir / "worker.log", {"ERASURE_CHAOS_PAUSE_MS": "150"}
        ).start()
        try:
            yield FaultStack(settings, platform, client, log_dir)
        finally:
            worker.stop()
            platform.close()
    finally:
        await asyncio.to_thread(launcher.down, settings, quiet, all_parts(settings))


async def seeded(faults: FaultStack, app: str, seed: int) -> tuple[str, str]:
    target, control = user_ids(2, seed, prefix=app)
    await seed_platform(faults.platform, app, [target, control], "typical", seed)
    return target, control


async def wait_for_activity(faults: FaultStack, request_id: str, name: str) -> None:
    from tests.crash_drill import pending_heartbeats

    for _ in range(600):
        if name in await pending_heartbeats(faults.client, request_id):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never ran")


async def pool_back(platform: Platform, within: float = 60.0) -> None:
    """Wait until the test's own pool serves a connection again. After an outage psycopg_pool reconnects
    with a backoff of its own, so a read right after the erasure can time out (seen in CI: PoolTimeout in
    the snapshot after Postgres came back). The worker's activities wait through Temporal's retries."""

    def one_read() -> None:
        with platform.pool.connection(timeout=2.0) as conn:
            conn.execute("SELECT 1")

    deadline = time.monotonic() + within
    while True:
        try:
            return await asyncio.to_thread(one_read)
        except (PoolTimeout, psycopg.OperationalError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def finish_and_check(
    faults: FaultStack, app: str, target: str, control: str, request_id: str, control_before: dict[str, object]
) -> list[tuple[str, int]]:
    result = await faults.harness.result(request_id, wait_seconds=240)
    assert result.status == "completed"
    await pool_back(faults.platform)
    assert all(v == 0 for v in user_snapshot(faults.platform, app, target)["counts"].values())
    after = user_snapshot(faults.platform, app, control)
    removed = faults.harness.receipt_body(request_id)["derived_rows_removed"]
    assert_untouched({control: control_before}, {control: after}, removed)  # type: ignore[dict-item]
    return await faults.retried_activities(request_id)


async def test_postgres_restarted_mid_erasure(faults: FaultStack) -> None:
    target, control = await seeded(faults, "pgfault", 111)
    before = user_snapshot(faults.platform, "pgfault", control)
    filed = await faults.harness.file("pgfault", target, delay=1)
    await wait_for_activity(faults, filed.request_id, "erase:sessions")
    pg = faults.part(PostgresPart)
    await asyncio.to_thread(pg.down)
    await asyncio.sleep(8)  # longer than the pool's 5 s wait: activities fail and Temporal retries them
    await asyncio.to_thread(pg.up)
    retried = await finish_and_check(faults, "pgfault", target, control, filed.request_id, before)
    assert retried, "the outage should show as retried activities in the history"


async def test_s3_unavailable_for_thirty_seconds(faults: FaultStack) -> None:
    target, control = await seeded(faults, "s3fault", 112)
    before = user_snapshot(faults.platform, "s3fault", control)
    filed = await faults.harness.file("s3fault", target, delay=1)
    await wait_for_activity(faults, filed.request_id, "erase:artifacts")
    s3 = faults.part(S3Part)
    await asyncio.to_thread(s3.down)
    assert (await asyncio.to_thread(s3.status)).state == "stopped"  # really away while the erasure runs
    await asyncio.sleep(30)
    await asyncio.to_thread(s3.up)
    retried = await finish_and_check(faults, "s3fault", target, control, filed.request_id, before)
    assert any(name == "erase:artifacts" for name, _ in retried)


async def test_kms_unavailable_then_back(faults: FaultStack) -> None:
    """Shredding needs no KMS, but capturing canaries unwraps the user's key: the saga waits and retries."""
    target, control = await seeded(faults, "kmsfault", 113)
    before = user_snapshot(faults.platform, "kmsfault", control)
    kms = faults.part(KmsPart)
    await asyncio.to_thread(kms.down)
    try:
        filed = await faults.harness.file("kmsfault", target, delay=1)
        await asyncio.sleep(10)
    finally:
        await asyncio.to_thread(kms.up)
    retried = await finish_and_check(faults, "kmsfault", target, control, filed.request_id, before)
    assert any(name == "begin_request" for name, _ in retried)
    # the restarted endpoint still unwraps data keys wrapped before it went down
    rows = faults.platform.memory_store.rows_of("kmsfault", control)
    with faults.platform.pool.connection() as conn:
        sealed = conn.execute("SELECT content_sealed FROM memories WHERE id = %s", (rows[0][0],)).fetchone()
    assert sealed is not None
    assert faults.platform.memory_store.decrypt_row(rows[0][0], bytes(sealed[0]))


async def test_temporal_server_restarted_mid_erasure(faults: FaultStack) -> None:
    target, control = await seeded(faults, "tfault", 114)
    before = user_snapshot(faults.platform, "tfault", control)
    filed = await faults.harness.file("tfault", target, delay=1)
    await wait_for_activity(faults, filed.request_id, "erase:artifacts")
    temporal = faults.part(TemporalPart)
    await asyncio.to_thread(temporal.down)
    await asyncio.sleep(2)
    await asyncio.to_thread(temporal.up)
    await finish_and_check(faults, "tfault", target, control, filed.request_id, before)

"""The benchmark's run: start a stack, build its clients and workers, call the phases in order, stop the stack,
report (``bench.report``)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from bench import ceiling, report, results_history
from bench.counters import CallCounter, watch_boto, watch_cache, watch_chroma, watch_sql
from bench.direct import erase_directly
from bench.harness import APP, Bench, say
from bench.measured import Erasure, Figures
from bench.phases import background_jobs, hot_paths, saga_vs_direct, throughput
from bench.plan import Plan
from stores.platform import Platform
from tests.stack_fixture import make_test_settings
from workers.local_kms import offline_wrapper, read_key_id
from workers.local_secrets import load_secrets
from workers.schedule import SCHEDULE_IDS
from workers.settings import Settings
from workers.stack import launcher
from workers.stack.parts import KmsPart
from workers.temporal_client import connect
from workers.wiring import build_platform
from workers.worker import build_physical_worker, build_worker


async def measure(plan: Plan, settings: Settings) -> tuple[Figures, Erasure | None]:
    secrets = load_secrets(settings)
    counter = CallCounter()
    watch_sql(counter)
    seeder = build_platform(settings, secrets)
    platform = build_platform(settings, secrets)
    watch_boto(platform.s3, "s3", counter)
    watch_boto(platform.kms, "kms", counter)
    if platform.config.cache_url:
        watch_cache(platform.response_cache.client, counter)
    if platform.config.chroma_path:
        watch_chroma(platform.chroma_memory, counter)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    ceiling_queue = queue + "-ceiling"
    settings = settings.model_copy(update={"task_queue": queue})
    client = await connect(settings, secrets)
    await pause_schedules(client)
    worker = build_worker(client, queue, platform, secrets.signing_key)
    physical_queue = queue + "-physical"
    physical_worker = build_physical_worker(client, physical_queue, platform, secrets.signing_key)
    ceiling_worker = Worker(
        client,
        task_queue=ceiling_queue,
        workflows=[ceiling.CeilingWorkflow, ceiling.CeilingVerifierWorkflow],
        activities=[ceiling.noop],
        activity_executor=ThreadPoolExecutor(max_workers=16, thread_name_prefix="bench-ceiling"),
        max_concurrent_activities=16,
    )
    bench = Bench(plan, settings, platform, client, counter)
    sample: Erasure | None = None
    try:
        async with worker, ceiling_worker, physical_worker:
            say("warm-up: one small erasure by saga and one directly (connections, clients; not measured)")
            warm = await bench.seed(seeder, "warmup", 2, "small")
            await bench.erase(warm[0])
            erase_directly(platform, APP, warm[1])
            say(f"phase 1: 10 background users, {plan.runs} run(s) of a {plan.target_size} user")
            await bench.seed(seeder, "bg", plan.background_small, "typical")
            small = await saga_vs_direct.platform_phase(bench, seeder, "small")
            sample = small[0] if small else None
            if sample:
                bench.figures.notes["activities_per_erasure"] = sample.activities
                bench.figures.notes["activity_counts"] = sample.activity_counts
                bench.figures.notes["raw_calls_per_erasure"] = sample.raw_calls
                bench.figures.notes["steps_seconds"] = [[n, round(s, 4)] for n, s in sample.steps]
            await background_jobs.physical(bench, "small", physical_queue)
            say(f"phase 2: {plan.background_large:,} background users (beyond the first 10: bulk-seeded)")
            extra = plan.background_large - plan.background_small
            if extra > 0:
                await bench.seed_bulk(seeder, extra, bulk_wrap(settings, seeder, plan.bulk_keys))
            large = await saga_vs_direct.platform_phase(bench, seeder, "large")
            if large:
                bench.figures.notes["steps_seconds_large_platform"] = [[n, round(s, 4)] for n, s in large[0].steps]
            await background_jobs.physical(bench, "large", physical_queue)
            say(f"phase 3: throughput, {plan.concurrent} concurrent small users, and the ceiling")
            await throughput.throughput(bench, seeder, ceiling_queue)
            say(f"phase 4: expiry sweep cost per expired row, {plan.expiry_rows} expired rows at two table sizes")
            await background_jobs.expiry(bench)
            say(f"phase 5: sealing on the hot paths (memory search over {plan.search_rows:,} rows, append, load)")
            await hot_paths.sealing(bench)
            if plan.huge:
                say("phase 9: a huge user (10x large, bulk-seeded) by saga and its twin directly")
                await saga_vs_direct.huge(bench, seeder, bulk_wrap(settings, seeder, plan.bulk_keys))
            if plan.backlog:
                say(f"phase 6: backlog, {plan.backlog} small erasures filed at once, 1 then 2 worker processes")
                await throughput.backlog(bench, seeder)
                await background_jobs.physical(bench, "backlog", physical_queue)
    finally:
        seeder.close()
        platform.close()
    return bench.figures, sample


async def pause_schedules(client: Client) -> None:
    """The stack's own scheduled jobs paused for the run: the physical job would otherwise attest the bench's
    requests before its own run (a full run measured 0 requests covered), and every job loads the machine."""
    for schedule_id in SCHEDULE_IDS:
        await client.get_schedule_handle(schedule_id).pause(note="paused by the benchmark for its run")


def bulk_wrap(settings: Settings, seeder: Platform, keys: str) -> Callable[[bytes], bytes] | None:
    """Offline wrapping by the local KMS key (``workers.local_kms.offline_wrapper``) when asked for and the
    stack's KMS is the embedded one with that key; ``None``: one KMS ``GenerateDataKey`` per user."""
    state = KmsPart(settings).key_state
    if keys != "offline" or not settings.embedded_kms or read_key_id(state) != seeder.config.kms_key_id:
        return None
    return offline_wrapper(state)


def main_sync(plan: Plan, echo: Callable[[str], None] = say, history: Path | None = results_history.HISTORY) -> int:
    """Stack up (synchronous: the launcher runs its own event loops), measure, stack down, report."""
    started = time.monotonic()
    state = Path(tempfile.mkdtemp(prefix="bench-state-"))
    settings = make_test_settings(state)
    echo("starting the local stack ...")
    try:
        launcher.up(settings, echo=lambda _m: None)
        echo(f"  stack up in {time.monotonic() - started:.1f}s")
        figures, sample = asyncio.run(measure(plan, settings))
    finally:
        echo("stopping the local stack ...")
        launcher.down(settings, echo=lambda _m: None)
        shutil.rmtree(state, ignore_errors=True)
    total = time.monotonic() - started
    report.print_and_record(plan, figures, sample, total, history)
    return 0

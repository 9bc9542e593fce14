"""Crash drills: SIGKILL the worker process at chosen points of a running erasure, restart, repeat.

A kill point names an activity and a condition on its last heartbeat details (inside a batched step),
or a stage the saga has just entered (between steps). Shared by the test suite and the randomised
long-run script (``python -m tests.crash_drill``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.untouched import assert_untouched
from tests.worker_process import WorkerProcess
from workers.settings import Settings
from workflows.contracts.erasure import activity_label, workflow_id
from workflows.contracts.search_attributes import ERASURE_STAGE


@dataclass(frozen=True)
class KillPoint:
    name: str
    activity: str | None = None  # kill inside this activity once ``reached(details)`` holds
    reached: Callable[[dict[str, Any]], bool] = lambda _d: True
    stage: str | None = None  # or: kill as soon as the saga has entered this stage


async def pending_heartbeats(
    client: Client, request_id: str, workflow_of: Callable[[str], str] = workflow_id
) -> dict[str, dict[str, Any]]:
    desc = await client.get_workflow_handle(workflow_of(request_id)).describe()
    out: dict[str, dict[str, Any]] = {}
    for pending in desc.raw_description.pending_activities:
        details: dict[str, Any] = {}
        if pending.heartbeat_details.payloads:
            values = await client.data_converter.decode(pending.heartbeat_details.payloads)
            if values and isinstance(values[0], dict):
                details = values[0]
        out[activity_label(pending.activity_type.name, pending.activity_id)] = details
    return out


async def current_stage(client: Client, request_id: str, workflow_of: Callable[[str], str] = workflow_id) -> str | None:
    """The ErasureStage search attribute, from describe (no query: a query would wait for a live worker)."""
    desc = await client.get_workflow_handle(workflow_of(request_id)).describe()
    return desc.typed_search_attributes.get(ERASURE_STAGE)


async def reached(
    client: Client, request_id: str, point: KillPoint, workflow_of: Callable[[str], str] = workflow_id
) -> bool:
    if point.stage is not None:
        return await current_stage(client, request_id, workflow_of) == point.stage
    beats = await pending_heartbeats(client, request_id, workflow_of)
    return point.activity in beats and point.reached(beats[point.activity])


async def drill(
    client: Client,
    settings: Settings,
    temporal_target: str,
    request_id: str,
    points: list[KillPoint],
    log_dir: Path,
    pause_ms: int = 1100,
    wait_seconds: float = 120,
    workflow_of: Callable[[str], str] = workflow_id,
) -> list[str]:
    """Kill at each point in turn (restarting a worker each time); returns the points actually hit.

    Each heartbeat is followed by a pause longer than the worker's heartbeat throttle (1 s), so every
    heartbeat reaches the server before the next: with shorter pauses a branch could run from "1 batch"
    to done between two heartbeats the server saw, and a kill point would be missed.
    """
    hit: list[str] = []
    for n, point in enumerate(points):
        # small delete batches so a kill can land between two batches of one user's artifacts
        drill_env = {"ERASURE_CHAOS_PAUSE_MS": str(pause_ms), "ERASURE_S3_DELETE_BATCH": "4"}
        worker = WorkerProcess(settings, temporal_target, log_dir / f"worker-{n}.log", drill_env).start()
        try:
            deadline = asyncio.get_running_loop().time() + wait_seconds
            while asyncio.get_running_loop().time() < deadline:
                if await reached(client, request_id, point, workflow_of):
                    hit.append(point.name)
                    break
                await asyncio.sleep(0.05)
        finally:
            worker.kill()
    return hit


# ----- the long randomised run: python -m tests.crash_drill --erasures 5 ------------------------------

RANDOM_POINTS = [  # in the order they can occur (artifacts, logs and sessions -> memory run side by side)
    KillPoint("sessions", "erase:sessions"),
    KillPoint("memory", "erase:memory"),
    KillPoint("artifacts mid-batch", "erase:artifacts", lambda d: d.get("batches", 0) >= 1),
    KillPoint("logs mid-batch", "erase:logs", lambda d: d.get("segments", 0) >= 1),
    KillPoint("keys", "erase:keys"),
    KillPoint("main verification", stage="verify_main"),
    KillPoint("durable timer", stage="wait"),
    KillPoint("sweep", "sweep_stores"),
    KillPoint("lift fence", "lift_fence"),
]


async def _randomised(erasures: int, seed: int, state_dir: Path) -> int:
    import random

    from stores.operations.database import prepare_database
    from stores.operations.fingerprint import user_snapshot
    from tests.saga_harness import SagaHarness
    from tests.stack_fixture import make_test_settings
    from workers.stack import launcher
    from workers.stack.parts import all_parts
    from workers.stack.seeding.seeder import seed_platform, user_ids
    from workers.temporal_client import connect
    from workers.wiring import build_platform

    rng = random.Random(seed)
    settings = make_test_settings(state_dir)
    launcher.up(settings, parts=all_parts(settings))
    failures = 0
    try:
        prepare_database(settings.postgres_url)
        launcher.ensure_buckets(settings)
        await launcher._register_search_attributes(settings)
        with build_platform(settings) as platform:
            client = await connect(settings)
            harness = SagaHarness(client, platform, settings)
            for n in range(erasures):
                app = f"drill{n}"
                target, control = user_ids(2, seed + n, prefix="drill")
                await seed_platform(platform, app, [target, control], "typical", seed + n)
                control_before = user_snapshot(platform, app, control)
                points = sorted(rng.sample(RANDOM_POINTS, rng.randint(2, 5)), key=RANDOM_POINTS.index)
                filed = await harness.file(app, target, delay=2)
                hit = await drill(client, settings, settings.temporal_target, filed.request_id, points, state_dir)
                survivor = WorkerProcess(settings, settings.temporal_target, state_dir / f"survivor-{n}.log").start()
                try:
                    result = await harness.result(filed.request_id, wait_seconds=300)
                    again = await harness.erase(app, target)
                finally:
                    survivor.stop()
                body = harness.receipt_body(filed.request_id)  # raises if the signature does not verify
                try:
                    control_after = user_snapshot(platform, app, control)
                    assert_untouched({control: control_before}, {control: control_after}, body["derived_rows_removed"])
                    untouched = True
                except AssertionError:
                    untouched = False
                ok = (
                    result.status == "completed"
                    and all(v == 0 for v in user_snapshot(platform, app, target)["counts"].values())
                    and all(sum(s.counts.values()) == 0 for s in again.steps if s.name not in ("fence", "lift_fence"))
                    and untouched
                )
                failures += not ok
                print(f"erasure {n + 1}/{erasures}: killed at {hit} -> {result.status}, {'ok' if ok else 'FAILED'}")
    finally:
        launcher.down(settings, parts=all_parts(settings))
    return failures


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="randomised crash drill on a private local stack")
    parser.add_argument("--erasures", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crash-drill-") as tmp:
        failures = asyncio.run(_randomised(args.erasures, args.seed, Path(tmp)))
    print(f"{args.erasures - failures}/{args.erasures} erasures completed correctly after their crashes")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()

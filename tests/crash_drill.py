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

from tests.worker_process import WorkerProcess
from workers.settings import Settings
from workflows.contracts import workflow_id
from workflows.search_attributes import ERASURE_STAGE


@dataclass(frozen=True)
class KillPoint:
    name: str
    activity: str | None = None  # kill inside this activity once ``reached(details)`` holds
    reached: Callable[[dict[str, Any]], bool] = lambda _d: True
    stage: str | None = None  # or: kill as soon as the saga has entered this stage


async def pending_heartbeats(client: Client, request_id: str) -> dict[str, dict[str, Any]]:
    desc = await client.get_workflow_handle(workflow_id(request_id)).describe()
    out: dict[str, dict[str, Any]] = {}
    for pending in desc.raw_description.pending_activities:
        details: dict[str, Any] = {}
        if pending.heartbeat_details.payloads:
            values = await client.data_converter.decode(pending.heartbeat_details.payloads)
            if values and isinstance(values[0], dict):
                details = values[0]
        out[pending.activity_type.name] = details
    return out


async def current_stage(client: Client, request_id: str) -> str | None:
    """The ErasureStage search attribute, from describe (no query: a query would wait for a live worker)."""
    desc = await client.get_workflow_handle(workflow_id(request_id)).describe()
    return desc.typed_search_attributes.get(ERASURE_STAGE)


async def reached(client: Client, request_id: str, point: KillPoint) -> bool:
    if point.stage is not None:
        return await current_stage(client, request_id) == point.stage
    beats = await pending_heartbeats(client, request_id)
    return point.activity in beats and point.reached(beats[point.activity])


async def drill(
    client: Client,
    settings: Settings,
    temporal_target: str,
    request_id: str,
    points: list[KillPoint],
    log_dir: Path,
    pause_ms: int = 300,
    wait_seconds: float = 60,
) -> list[str]:
    """Kill at each point in turn (restarting a worker each time); returns the points actually hit."""
    hit: list[str] = []
    for n, point in enumerate(points):
        worker = WorkerProcess(
            settings, temporal_target, log_dir / f"worker-{n}.log", {"ERASURE_CHAOS_PAUSE_MS": str(pause_ms)}
        ).start()
        try:
            deadline = asyncio.get_running_loop().time() + wait_seconds
            while asyncio.get_running_loop().time() < deadline:
                if await reached(client, request_id, point):
                    hit.append(point.name)
                    break
                await asyncio.sleep(0.05)
        finally:
            worker.kill()
    return hit

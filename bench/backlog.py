"""The backlog run: many small erasures filed at once, drained by one and then by two worker processes.

Each run gets a task queue of its own, served only by ``k`` real ``erasure worker`` processes
(``tests.worker_process.WorkerProcess``, the production entry point with the stack's settings). All
requests are filed at once (16 at a time through the client: filing is a row and a workflow start), then
the run waits for every result. Reported per run:

- drain time: from the first filing to the last result;
- latency per request: the workflow's start to its close (server times), p50 and p99;
- how many completed (``completed`` means the final verification passed and the receipt was issued);
- each worker process's CPU seconds per erasure (user + system, ``psutil``) and its peak RSS (sampled every
  half second): what scales with workers, whatever the machine's cores are busy with.

On a 2-core machine shared with the whole stack, two worker processes contend with Temporal and Postgres
for the same cores: the drain-time ratio shows contention; the CPU seconds per erasure is the figure a
capacity plan multiplies.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from temporalio.client import Client

from stores.platform import Platform
from tests.worker_process import WorkerProcess
from workers.service import file_request
from workers.settings import Settings
from workflows.contracts.erasure import ErasureResult

FILING_CONCURRENCY = 16


@dataclass
class BacklogRun:
    workers: int
    erasures: int
    completed: int = 0
    drain_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # per worker process, over the run
    peak_rss_mb: list[float] = field(default_factory=list)  # per worker process

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    @property
    def cpu_per_erasure(self) -> float:
        """Worker CPU seconds per erasure, all worker processes together."""
        return sum(self.cpu_seconds) / max(self.erasures, 1)

    def summary(self) -> dict[str, float]:
        return {
            "workers": self.workers,
            "erasures": self.erasures,
            "completed": self.completed,
            "drain_seconds": round(self.drain_seconds, 2),
            "per_minute": round(self.erasures / self.drain_seconds * 60, 1) if self.drain_seconds else 0.0,
            "latency_p50_seconds": round(self.percentile(0.5), 2),
            "latency_p99_seconds": round(self.percentile(0.99), 2),
            "worker_cpu_seconds_per_erasure": round(self.cpu_per_erasure, 4),
            "worker_peak_rss_mb": round(max(self.peak_rss_mb, default=0.0), 1),
        }


class RssWatch:
    """Peak resident memory of each process, sampled until stopped."""

    def __init__(self, pids: Sequence[int], interval: float = 0.5) -> None:
        self.peaks = dict.fromkeys(pids, 0)
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        for pid in self.peaks:
            try:
                self.peaks[pid] = max(self.peaks[pid], psutil.Process(pid).memory_info().rss)
            except psutil.Error:
                continue

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self._interval)

    def __enter__(self) -> RssWatch:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def backlog_run(
    client: Client,
    platform: Platform,
    settings: Settings,
    app_name: str,
    users: Sequence[str],
    workers: int,
    log_dir: Path,
    say: Callable[[str], None],
) -> BacklogRun:
    """File one erasure per user at once on a fresh queue served by ``workers`` worker processes; drain it."""
    queue = f"backlog-{workers}-{uuid.uuid4().hex[:8]}"
    run_settings = settings.model_copy(update={"task_queue": queue})

    def start_workers() -> list[WorkerProcess]:
        log_dir.mkdir(parents=True, exist_ok=True)
        return [
            WorkerProcess(run_settings, settings.temporal_target, log_dir / f"backlog-{queue}-{n}.log").start()
            for n in range(workers)
        ]

    procs = await asyncio.to_thread(start_workers)
    out = BacklogRun(workers, len(users))
    try:
        pids = [p.proc.pid for p in procs if p.proc is not None]
        cpu_before = {pid: _cpu(pid) for pid in pids}
        gate = asyncio.Semaphore(FILING_CONCURRENCY)

        async def one(user: str) -> ErasureResult:
            async with gate:
                filed = await file_request(
                    client, platform, run_settings, app_name=app_name, user_id=user, ingestion_delay_seconds=0
                )
            handle = client.get_workflow_handle(filed.workflow_id, result_type=ErasureResult)
            result: ErasureResult = await handle.result()
            described = await handle.describe()
            if described.close_time is not None:
                out.latencies.append((described.close_time - described.start_time).total_seconds())
            return result

        started = time.perf_counter()
        with RssWatch(pids) as rss:
            results = await asyncio.gather(*(one(u) for u in users))
        out.drain_seconds = time.perf_counter() - started
        out.completed = sum(1 for r in results if r.status == "completed")
        out.cpu_seconds = [_cpu(pid) - cpu_before[pid] for pid in pids]
        out.peak_rss_mb = [rss.peaks[pid] / 2**20 for pid in pids]
    finally:
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in procs))
    s = out.summary()
    say(
        f"  [backlog, {workers} worker process(es)] {out.erasures} erasures drained in {s['drain_seconds']}s "
        f"({s['per_minute']}/min, {out.completed} completed); latency p50 {s['latency_p50_seconds']}s "
        f"p99 {s['latency_p99_seconds']}s; worker CPU {s['worker_cpu_seconds_per_erasure']}s/erasure; "
        f"peak RSS {s['worker_peak_rss_mb']} MB"
    )
    return out

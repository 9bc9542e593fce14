"""Figures 3 and 8: many small erasures at once, against the orchestration ceiling (no-op sagas) with the CPU
seconds per erasure, and a backlog drained by one then two worker processes."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from bench import backlog as backlog_bench
from bench import ceiling, cpu
from bench.counters import group
from bench.harness import APP, Bench, say
from bench.stats import ratio
from stores.platform import Platform


async def throughput(bench: Bench, seeder: Platform, ceiling_queue: str) -> None:
    n = bench.plan.concurrent
    for run in range(bench.plan.runs):
        users = await bench.seed(seeder, "tput", n, "small")
        before = bench.counter.snapshot()
        cpu_before = cpu.snapshot()
        started = time.perf_counter()
        results = await asyncio.gather(*(bench.erase(u) for u in users))
        wall = time.perf_counter() - started
        cpu_each = cpu.per_item(cpu_before, cpu.snapshot(), n)  # history reads for the actions included
        for component, seconds in cpu_each.items():
            bench.figures.add(f"cpu_{component}_per_erasure", seconds)
        bench.figures.add("actions_per_small_erasure", statistics.median(r.actions.get("total", 0) for r in results))
        # per-erasure deltas overlap when erasures run concurrently: divide the batch's total instead
        batch = group(
            bench.counter.since(before), bench.platform.config.artifact_bucket, bench.platform.config.log_bucket
        )
        failed = sum(1 for r in results if r.status != "completed")
        per_min = n / wall * 60
        started = time.perf_counter()
        await asyncio.gather(
            *(
                bench.client.execute_workflow(
                    ceiling.CeilingWorkflow.run,
                    f"{run}-{i}",
                    id=f"ceiling-{uuid.uuid4().hex[:10]}",
                    task_queue=ceiling_queue,
                )
                for i in range(n)
            )
        )
        ceiling_wall = time.perf_counter() - started
        ceiling_per_min = n / ceiling_wall * 60
        say(
            f"  [throughput run {run + 1}] {n} erasures in {wall:.1f}s ({per_min:.1f}/min, {failed} not completed);"
            f" ceiling {ceiling_per_min:.1f}/min"
        )
        bench.figures.add("throughput_per_min", per_min)
        bench.figures.add("ceiling_per_min", ceiling_per_min)
        bench.figures.add("throughput_share", ratio(per_min, ceiling_per_min))
        bench.figures.add("small_calls_kms", batch["kms_calls"] / n)


async def backlog(bench: Bench, seeder: Platform) -> None:
    runs = {}
    for workers in (1, 2):
        users = await bench.seed(seeder, f"backlog{workers}", bench.plan.backlog, "small")
        run = await backlog_bench.backlog_run(
            bench.client, bench.platform, bench.settings, APP, users, workers, bench.plan.out_dir / "worker-logs", say
        )
        runs[workers] = run.summary()
        for key, value in runs[workers].items():
            if key not in ("workers", "erasures"):
                bench.figures.add(f"backlog_{key}_{workers}w", float(value))
    bench.figures.notes["backlog"] = runs
    if runs[2]["drain_seconds"]:
        bench.figures.add("backlog_speedup_2w", ratio(runs[1]["drain_seconds"], runs[2]["drain_seconds"]))

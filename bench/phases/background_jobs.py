"""Figures 6 and 10: the platform's background jobs, the expiry sweep's cost per expired row at two table
sizes and the physical job's run over the requests finished so far."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

from bench import expiry as expiry_bench
from bench.harness import APP, Bench, say
from workflows.contracts.physical import PHYSICAL_WORKFLOW, PhysicalJobInput, PhysicalResult


async def expiry(bench: Bench) -> None:
    """Figure 6: the expiry sweep's cost per expired row at ``expiry_background`` and 10x as many rows."""
    plan, have = bench.plan, 0
    costs: dict[str, list[expiry_bench.SweepCost]] = {"small": [], "large": []}
    for label, rows in (("small", plan.expiry_background), ("large", plan.expiry_background * 10)):
        started = time.monotonic()
        have = await asyncio.to_thread(expiry_bench.grow_background, bench.platform, APP, have, rows)
        say(f"  background memory rows: {have:,} ({time.monotonic() - started:.1f}s to write)")
        for run in range(plan.runs):
            ids = await asyncio.to_thread(
                expiry_bench.write_expired, bench.platform, APP, plan.expiry_rows, plan.expiry_subjects
            )
            cost = await expiry_bench.sweep_cost(
                bench.client, bench.settings.task_queue, bench.platform, bench.counter, have, ids
            )
            say(
                f"  [expiry run {run + 1}, {have:,} rows] {cost.expired} expired rows in {cost.seconds:.2f}s "
                f"({cost.seconds_per_row * 1000:.1f} ms/row, {cost.statements_per_row:.1f} SQL/row; "
                f"{cost.counts.completed} forgets completed)"
            )
            bench.figures.add(f"expiry_ms_per_row_{label}", cost.seconds_per_row * 1000)
            bench.figures.add(f"expiry_sql_per_row_{label}", cost.statements_per_row)
            costs[label].append(cost)
    for a, b in zip(costs["small"], costs["large"], strict=True):
        bench.figures.add("expiry_apart", expiry_bench.apart(a.seconds_per_row, b.seconds_per_row))
    bench.figures.notes["expiry_runs"] = [dataclasses.asdict(c) for c in costs["small"] + costs["large"]]


async def physical(bench: Bench, label: str, queue: str) -> None:
    """The platform's physical job over every request finished so far (issue 30): one run's wall time, the
    requests it covered, the cost per erased user, and whether it ended within the platform's window."""
    started = time.perf_counter()
    result = await bench.client.execute_workflow(
        PHYSICAL_WORKFLOW,
        PhysicalJobInput(fail_on_overdue=False),
        id=f"physical-bench-{label}-{uuid.uuid4().hex[:6]}",
        task_queue=queue,
        result_type=PhysicalResult,
    )
    took = time.perf_counter() - started
    window = bench.platform.config.physical_window.total_seconds()
    bench.figures.add(f"physical_seconds_{label}", took)
    bench.figures.add(f"physical_requests_{label}", float(result.requests))
    bench.figures.add(f"physical_attested_{label}", float(result.attested))
    if result.requests:
        bench.figures.add(f"physical_seconds_per_request_{label}", took / result.requests)
    bench.figures.add(f"physical_window_met_{label}", float(took <= window))
    say(
        f"  physical job ({label}): {result.requests} request(s), {result.attested} attested in {took:.2f}s "
        f"(window {window / 60:.0f} min)"
    )

"""Figures 1, 2, 4, 5 and 9: one user erased by the saga against its twin erased by direct deletions, at each
platform size (time, calls, actions, the verifier's share) and for a ``huge`` user (every step on its first try)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from bench.harness import APP, Bench, say
from bench.history import attempts
from bench.measured import Erasure
from bench.quiet import autovacuum_idle
from bench.stats import ratio
from stores.platform import Platform
from workers.stack.seeding.bulk_seed import bulk_seed
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import workflow_id
from workflows.erasure import HEARTBEAT_TIMEOUT


async def platform_phase(bench: Bench, seeder: Platform, label: str) -> list[Erasure]:
    """``runs`` x (seed a target and its twin; erase the target by saga, the twin directly)."""
    size = bench.plan.target_size
    done: list[Erasure] = []
    for run in range(bench.plan.runs):
        target = (await bench.seed(seeder, f"target-{label}", 1, size))[0]
        twin = (await bench.seed(seeder, f"twin-{label}", 1, size))[0]
        # both sides start with autovacuum idle (``bench.quiet``): seeding a user sets it off on the tables
        # it wrote, and the side measured first would otherwise pay for it (the saga, every run)
        quiet = [await asyncio.to_thread(autovacuum_idle, bench.platform)]
        erasure = await bench.erase(target)
        quiet.append(await asyncio.to_thread(autovacuum_idle, bench.platform))
        direct, direct_calls = bench.direct(twin)
        bench.figures.notes.setdefault(f"autovacuum_waits_{label}", []).append([round(q, 1) for q in quiet])
        say(
            f"  [{label} run {run + 1}] saga {erasure.wall:.2f}s ({erasure.status}), direct {direct:.2f}s, "
            f"verifier in saga {erasure.verifier_in_saga:.2f}s; waited for autovacuum {quiet[0]:.0f}s and "
            f"{quiet[1]:.0f}s before them"
        )
        bench.figures.add(f"saga_seconds_{label}", erasure.wall)
        bench.figures.add(f"direct_seconds_{label}", direct)
        bench.figures.add(f"overhead_{label}", ratio(erasure.wall, direct))
        bench.figures.add(f"verifier_share_{label}", ratio(erasure.verifier_in_saga, erasure.wall))
        bench.figures.add(f"deletion_steps_seconds_{label}", erasure.deleting)
        bench.figures.add(f"orchestration_gaps_seconds_{label}", erasure.wall - erasure.busy)
        for k, v in erasure.calls.items():
            bench.figures.add(f"calls_{k}_{label}", v)
        for k, v in direct_calls.items():
            bench.figures.add(f"direct_calls_{k}_{label}", v)
        for k in ("sql_statements", "s3_requests"):
            if direct_calls.get(k):
                bench.figures.add(f"{k}_ratio_{label}", ratio(erasure.calls.get(k, 0), direct_calls[k]))
        bench.figures.add(f"actions_{label}", erasure.actions.get("total", 0))
        bench.figures.add(f"heartbeats_{label}", erasure.actions.get("heartbeats_estimated", 0))
        if run == 0:
            reverify = await bench.reverify(erasure.request_id)
            bench.figures.add(f"reverify_share_{label}", ratio(reverify, erasure.wall))
        done.append(erasure)
    return done


async def huge(bench: Bench, seeder: Platform, wrap: Callable[[bytes], bytes] | None) -> None:
    """Figure 9: a ``huge`` user and its twin (bulk-seeded: 10x ``large``); the saga erases one, the direct
    deletions the other. Every step must finish on its first attempt: a step that ran past the heartbeat
    timeout without being retried heartbeated all along."""
    seed_n = bench.next_seed()
    users = user_ids(2, seed_n, prefix=f"huge-{uuid.uuid4().hex[:6]}")
    report = await bulk_seed(seeder, APP, users, "huge", seed=1000 + seed_n, wrap=wrap)
    size = report.shape
    say(
        f"  bulk-seeded 2 huge users in {report.seconds:.1f}s ({size.sessions * size.events_per_session:,} "
        f"events, {size.artifacts * size.versions:,} artifact versions each; {report.total_rows:,} rows in all)"
    )
    quiet = [await asyncio.to_thread(autovacuum_idle, bench.platform)]
    erasure = await bench.erase(users[0])
    quiet.append(await asyncio.to_thread(autovacuum_idle, bench.platform))
    direct, _calls = bench.direct(users[1])
    say(f"  waited for autovacuum to go idle before each: {quiet[0]:.0f}s and {quiet[1]:.0f}s")
    saga_history = await bench.client.get_workflow_handle(workflow_id(erasure.request_id)).fetch_history()
    tries = attempts(saga_history.events)
    child = await bench.client.get_workflow_handle(f"verify-{erasure.request_id}-final").fetch_history()
    tries.update({f"{k}(final)": v for k, v in attempts(child.events).items()})
    longest = max(erasure.steps, key=lambda step: step[1])
    past_timeout = sum(1 for _name, seconds in erasure.steps if seconds > HEARTBEAT_TIMEOUT.total_seconds())
    retries = sum(n - 1 for n in tries.values())
    say(
        f"  [huge] saga {erasure.wall:.1f}s ({erasure.status}), direct {direct:.1f}s; longest step "
        f"{longest[0]} {longest[1]:.1f}s; {past_timeout} step(s) past the heartbeat timeout; retries "
        f"{retries}"
    )
    bench.figures.add("saga_seconds_huge", erasure.wall)
    bench.figures.add("direct_seconds_huge", direct)
    bench.figures.add("overhead_huge", ratio(erasure.wall, direct))
    bench.figures.add("longest_step_seconds_huge", longest[1])
    bench.figures.add("steps_past_heartbeat_timeout_huge", past_timeout)
    bench.figures.add("retries_huge", retries)
    bench.figures.notes["huge"] = {
        "steps_seconds": [[n, round(t, 2)] for n, t in erasure.steps],
        "attempts": tries,
        "status": erasure.status,
        "seeding": report.summary(),
        "autovacuum_waits_seconds": [round(q, 1) for q in quiet],
    }

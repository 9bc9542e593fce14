"""The benchmark itself: start a stack, seed, measure, print, write JSON, a line of results history and charts."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench import backlog as backlog_bench
from bench import capacity, ceiling, cpu, results_history
from bench import expiry as expiry_bench
from bench import sealing as sealing_bench
from bench.actions import count_actions
from bench.counters import CallCounter, group, watch_boto, watch_cache, watch_chroma, watch_sql
from bench.direct import erase_directly
from bench.history import attempts, counts_by_name, covered, records, step_times
from bench.quiet import autovacuum_idle
from bench.stats import Row, Target, format_table, ratio, summarize
from stores.platform import Platform
from tests.stack_fixture import make_test_settings
from workers.local_kms import offline_wrapper, read_key_id
from workers.local_secrets import load_secrets
from workers.schedule import SCHEDULE_IDS
from workers.service import file_request, reverify_input
from workers.settings import Settings
from workers.stack import launcher
from workers.stack.parts import KmsPart
from workers.stack.seeding.bulk_check import check_sample
from workers.stack.seeding.bulk_seed import bulk_seed
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.temporal_client import connect
from workers.wiring import build_platform
from workers.worker import build_physical_worker, build_worker
from workflows.contracts.erasure import VERIFIER_WORKFLOW, ErasureResult, VerifyResult, workflow_id
from workflows.contracts.physical import PHYSICAL_WORKFLOW, PhysicalJobInput, PhysicalResult
from workflows.erasure import HEARTBEAT_TIMEOUT

APP = "bench-agent"
#: the saga's activities that delete (the work the direct path also does)
DELETION_STEPS = frozenset({"erase:artifacts", "erase:sessions", "erase:memory", "erase:logs", "erase:keys"})


@dataclass(frozen=True)
class Plan:
    quick: bool
    runs: int
    target_size: str  # the measured user ("large"; "typical" in quick mode)
    background_small: int  # background users of "typical" size (ADK services), small platform
    background_large: (
        int  # ... large platform: the users beyond background_small are bulk-seeded (workers.stack.seeding.bulk_seed)
    )
    concurrent: int  # concurrent "small" erasures for throughput
    out_dir: Path
    expiry_background: int = 5_000  # background memory rows of the expiry figure (then 10x as many)
    expiry_rows: int = 40  # expired rows the sweep forgets at each size ...
    expiry_subjects: int = 8  # ... of this many users (one forget each)
    search_rows: int = 2_000  # memory rows of the user whose search is timed sealed vs plain (figure 7)
    backlog: int = 0  # small erasures filed at once, drained by 1 then 2 worker processes (figure 8; 0: skipped)
    bulk_keys: str = "offline"  # bulk seeding's data keys: wrapped by the local KMS key; "kms": one call each
    huge: bool = False  # figure 9: a ``huge`` user (10x large, bulk-seeded) by saga and its twin directly

    @classmethod
    def make(
        cls,
        quick: bool,
        runs: int | None,
        out_dir: Path,
        size: str | None = None,
        backlog: int | None = None,
        background: int | None = None,
        bulk_keys: str = "offline",
        huge: bool | None = None,
    ) -> Plan:
        if quick:
            plan = cls(True, runs or 1, size or "typical", 10, 1_000, 20, out_dir, backlog=backlog or 0)
        else:
            full = cls(False, runs or 3, size or "large", 10, 100_000, 100, out_dir, 50_000, 200, 20, 13_000)
            plan = dataclasses.replace(full, backlog=1000 if backlog is None else backlog)
        if background is not None:
            plan = dataclasses.replace(plan, background_large=max(background, plan.background_small))
        return dataclasses.replace(plan, bulk_keys=bulk_keys, huge=not quick if huge is None else huge)


@dataclass
class Erasure:
    request_id: str
    wall: float
    status: str
    calls: dict[str, int]
    raw_calls: dict[str, int]
    steps: list[tuple[str, float]]
    activity_counts: dict[str, int]
    verifier_in_saga: float
    activities: int = 0  # activities of the saga and its verifier children
    deleting: float = 0.0  # seconds while at least one deleting activity ran (they run side by side)
    busy: float = 0.0  # seconds while at least one activity or child workflow ran
    actions: dict[str, int] = field(default_factory=dict)  # Temporal actions by kind (bench/actions.py)


@dataclass
class Figures:
    """Every measured value, per run, as lists (medians are taken at the end)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, plan: Plan, settings: Settings, platform: Platform, client: Client, counter: CallCounter):
        self.plan = plan
        self.settings = settings
        self.platform = platform
        self.client = client
        self.counter = counter
        self.figures = Figures()
        self.seeded = 0
        self._seed_n = 0

    # ----- seeding ---------------------------------------------------------------------------------

    async def seed(self, seeder: Platform, label: str, count: int, size: str) -> list[str]:
        self._seed_n += 1
        users = user_ids(count, self._seed_n, prefix=f"{label}-{uuid.uuid4().hex[:6]}")
        started = time.monotonic()
        report = await seed_platform(seeder, APP, users, size, seed=1000 + self._seed_n)
        took = time.monotonic() - started
        self.seeded += count
        self.figures.notes.setdefault("seeding_seconds", []).append([label, count, size, round(took, 2)])
        say(f"  seeded {count} {size} user(s) ({label}) in {took:.1f}s")
        if count == 1:
            u = report.users[0]
            self.figures.notes.setdefault("volumes", {})[size] = {
                "sessions": len(u.session_ids),
                "events": u.events,
                "artifact_versions": u.artifact_versions,
                "memories": len(u.memory_ids),
                "log_lines": u.log_lines,
            }
        return users

    async def seed_bulk(self, seeder: Platform, count: int, wrap: Callable[[bytes], bytes] | None) -> list[str]:
        """``count`` background users straight into each store's format (``workers.stack.seeding.bulk_seed``), then 20
        of them read back through the services (``workers.stack.seeding.bulk_check``); throughput to stderr and
        bench.json."""
        self._seed_n += 1
        users = user_ids(count, self._seed_n, prefix=f"bulk-{uuid.uuid4().hex[:6]}")
        step = max(1, count // 10)

        def progress(message: str) -> None:
            done = int(message.split()[1].split("/")[0])
            if done % step < 1000 or done == count:
                say(f"  {message}")

        report = await bulk_seed(
            seeder, APP, users, "background", seed=1000 + self._seed_n, wrap=wrap, progress=progress
        )
        done = report.summary()
        say(
            f"  bulk-seeded {count:,} background users in {report.seconds:.1f}s: {done['users_per_second']:,} users/s, "
            f"{report.total_rows:,} rows ({done['rows_per_second']:,}/s), {report.objects:,} objects, "
            f"{report.log_lines:,} log lines, {report.keys_generated:,} data keys ({report.kms_calls:,} KMS calls)"
        )
        checked = await check_sample(seeder, report, sample=20)
        done["sample_check"] = {"users": len(checked.users), "checks": checked.checks, "failures": checked.failures}
        say(f"  read back {len(checked.users)} of them: {'ok' if checked.passed else checked.failures[:3]}")
        done["autovacuum_wait_seconds"] = round(await asyncio.to_thread(autovacuum_idle, self.platform), 1)
        say(f"  waited {done['autovacuum_wait_seconds']:.0f}s for autovacuum to go idle")
        self.seeded += count
        self.figures.notes.setdefault("bulk_seeding", []).append(done)
        self.figures.notes.setdefault("seeding_seconds", []).append(["bulk-bg", count, "background", done["seconds"]])
        return users

    # ----- one erasure -----------------------------------------------------------------------------

    async def erase(self, user: str) -> Erasure:
        before = self.counter.snapshot()
        started = time.perf_counter()
        filed = await file_request(
            self.client, self.platform, self.settings, app_name=APP, user_id=user, ingestion_delay_seconds=0
        )
        handle = self.client.get_workflow_handle(filed.workflow_id, result_type=ErasureResult)
        result = await handle.result()
        wall = time.perf_counter() - started
        raw = self.counter.since(before)
        history = await handle.fetch_history()
        recs = records(history.events)
        steps = step_times(recs)
        verifier = sum(v for name, v in steps if name.startswith(VERIFIER_WORKFLOW))
        calls = group(raw, self.platform.config.artifact_bucket, self.platform.config.log_bucket)
        activity_counts = counts_by_name(recs)
        for phase in ("main", "final"):
            if f"{VERIFIER_WORKFLOW}({phase})" not in activity_counts:
                continue  # no main-pass verification without an ingestion delay
            child = await self.client.get_workflow_handle(f"verify-{filed.request_id}-{phase}").fetch_history()
            for name, n in counts_by_name(records(child.events)).items():
                activity_counts[f"{name}({phase})"] = n
        activities = sum(n for name, n in activity_counts.items() if not name.startswith(VERIFIER_WORKFLOW))
        actions = await count_actions(self.client, filed.workflow_id)
        return Erasure(
            filed.request_id,
            wall,
            result.status,
            calls,
            dict(raw),
            steps,
            activity_counts,
            verifier,
            activities,
            deleting=covered(recs, DELETION_STEPS),
            busy=covered(recs),
            actions=actions.as_dict(),
        )

    async def reverify(self, request_id: str) -> float:
        row = self.platform.requests.get(request_id)
        started = time.perf_counter()
        result = await self.client.execute_workflow(
            VERIFIER_WORKFLOW,
            reverify_input(row),
            id=f"reverify-{row.request_id}-bench",  # a verifier of the request's own (the approval gate)
            task_queue=self.settings.task_queue,
            result_type=VerifyResult,
        )
        took = time.perf_counter() - started
        if not result.passed:
            say(f"  ! re-verification of {request_id} failed")
        return took

    def direct(self, user: str) -> tuple[float, dict[str, int]]:
        before = self.counter.snapshot()
        started = time.perf_counter()
        result = erase_directly(self.platform, APP, user)
        took = time.perf_counter() - started
        calls = group(self.counter.since(before), self.platform.config.artifact_bucket, self.platform.config.log_bucket)
        self.figures.notes.setdefault("direct_removed", []).append(dataclasses.asdict(result))
        return took, calls

    # ----- phases ----------------------------------------------------------------------------------

    async def platform_phase(self, seeder: Platform, label: str) -> list[Erasure]:
        """``runs`` x (seed a target and its twin; erase the target by saga, the twin directly)."""
        size = self.plan.target_size
        done: list[Erasure] = []
        for run in range(self.plan.runs):
            target = (await self.seed(seeder, f"target-{label}", 1, size))[0]
            twin = (await self.seed(seeder, f"twin-{label}", 1, size))[0]
            # both sides start with autovacuum idle (``bench.quiet``): seeding a user sets it off on the tables
            # it wrote, and the side measured first would otherwise pay for it (the saga, every run)
            quiet = [await asyncio.to_thread(autovacuum_idle, self.platform)]
            erasure = await self.erase(target)
            quiet.append(await asyncio.to_thread(autovacuum_idle, self.platform))
            direct, direct_calls = self.direct(twin)
            self.figures.notes.setdefault(f"autovacuum_waits_{label}", []).append([round(q, 1) for q in quiet])
            say(
                f"  [{label} run {run + 1}] saga {erasure.wall:.2f}s ({erasure.status}), direct {direct:.2f}s, "
                f"verifier in saga {erasure.verifier_in_saga:.2f}s; waited for autovacuum {quiet[0]:.0f}s and "
                f"{quiet[1]:.0f}s before them"
            )
            self.figures.add(f"saga_seconds_{label}", erasure.wall)
            self.figures.add(f"direct_seconds_{label}", direct)
            self.figures.add(f"overhead_{label}", ratio(erasure.wall, direct))
            self.figures.add(f"verifier_share_{label}", ratio(erasure.verifier_in_saga, erasure.wall))
            self.figures.add(f"deletion_steps_seconds_{label}", erasure.deleting)
            self.figures.add(f"orchestration_gaps_seconds_{label}", erasure.wall - erasure.busy)
            for k, v in erasure.calls.items():
                self.figures.add(f"calls_{k}_{label}", v)
            for k, v in direct_calls.items():
                self.figures.add(f"direct_calls_{k}_{label}", v)
            for k in ("sql_statements", "s3_requests"):
                if direct_calls.get(k):
                    self.figures.add(f"{k}_ratio_{label}", ratio(erasure.calls.get(k, 0), direct_calls[k]))
            self.figures.add(f"actions_{label}", erasure.actions.get("total", 0))
            self.figures.add(f"heartbeats_{label}", erasure.actions.get("heartbeats_estimated", 0))
            if run == 0:
                reverify = await self.reverify(erasure.request_id)
                self.figures.add(f"reverify_share_{label}", ratio(reverify, erasure.wall))
            done.append(erasure)
        return done

    async def huge(self, seeder: Platform, wrap: Callable[[bytes], bytes] | None) -> None:
        """Figure 9: a ``huge`` user and its twin (bulk-seeded: 10x ``large``); the saga erases one, the direct
        deletions the other. Every step must finish on its first attempt: a step that ran past the heartbeat
        timeout without being retried heartbeated all along."""
        self._seed_n += 1
        users = user_ids(2, self._seed_n, prefix=f"huge-{uuid.uuid4().hex[:6]}")
        report = await bulk_seed(seeder, APP, users, "huge", seed=1000 + self._seed_n, wrap=wrap)
        size = report.shape
        say(
            f"  bulk-seeded 2 huge users in {report.seconds:.1f}s ({size.sessions * size.events_per_session:,} "
            f"events, {size.artifacts * size.versions:,} artifact versions each; {report.total_rows:,} rows in all)"
        )
        quiet = [await asyncio.to_thread(autovacuum_idle, self.platform)]
        erasure = await self.erase(users[0])
        quiet.append(await asyncio.to_thread(autovacuum_idle, self.platform))
        direct, _calls = self.direct(users[1])
        say(f"  waited for autovacuum to go idle before each: {quiet[0]:.0f}s and {quiet[1]:.0f}s")
        saga_history = await self.client.get_workflow_handle(workflow_id(erasure.request_id)).fetch_history()
        tries = attempts(saga_history.events)
        child = await self.client.get_workflow_handle(f"verify-{erasure.request_id}-final").fetch_history()
        tries.update({f"{k}(final)": v for k, v in attempts(child.events).items()})
        longest = max(erasure.steps, key=lambda step: step[1])
        past_timeout = sum(1 for _name, seconds in erasure.steps if seconds > HEARTBEAT_TIMEOUT.total_seconds())
        retries = sum(n - 1 for n in tries.values())
        say(
            f"  [huge] saga {erasure.wall:.1f}s ({erasure.status}), direct {direct:.1f}s; longest step "
            f"{longest[0]} {longest[1]:.1f}s; {past_timeout} step(s) past the heartbeat timeout; retries "
            f"{retries}"
        )
        self.figures.add("saga_seconds_huge", erasure.wall)
        self.figures.add("direct_seconds_huge", direct)
        self.figures.add("overhead_huge", ratio(erasure.wall, direct))
        self.figures.add("longest_step_seconds_huge", longest[1])
        self.figures.add("steps_past_heartbeat_timeout_huge", past_timeout)
        self.figures.add("retries_huge", retries)
        self.figures.notes["huge"] = {
            "steps_seconds": [[n, round(t, 2)] for n, t in erasure.steps],
            "attempts": tries,
            "status": erasure.status,
            "seeding": report.summary(),
            "autovacuum_waits_seconds": [round(q, 1) for q in quiet],
        }

    async def throughput(self, seeder: Platform, ceiling_queue: str) -> None:
        n = self.plan.concurrent
        for run in range(self.plan.runs):
            users = await self.seed(seeder, "tput", n, "small")
            before = self.counter.snapshot()
            cpu_before = cpu.snapshot()
            started = time.perf_counter()
            results = await asyncio.gather(*(self.erase(u) for u in users))
            wall = time.perf_counter() - started
            cpu_each = cpu.per_item(cpu_before, cpu.snapshot(), n)  # history reads for the actions included
            for component, seconds in cpu_each.items():
                self.figures.add(f"cpu_{component}_per_erasure", seconds)
            self.figures.add("actions_per_small_erasure", statistics.median(r.actions.get("total", 0) for r in results))
            # per-erasure deltas overlap when erasures run concurrently: divide the batch's total instead
            batch = group(
                self.counter.since(before), self.platform.config.artifact_bucket, self.platform.config.log_bucket
            )
            failed = sum(1 for r in results if r.status != "completed")
            per_min = n / wall * 60
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    self.client.execute_workflow(
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
            self.figures.add("throughput_per_min", per_min)
            self.figures.add("ceiling_per_min", ceiling_per_min)
            self.figures.add("throughput_share", ratio(per_min, ceiling_per_min))
            self.figures.add("small_calls_kms", batch["kms_calls"] / n)

    async def expiry(self) -> None:
        """Figure 6: the expiry sweep's cost per expired row at ``expiry_background`` and 10x as many rows."""
        plan, have = self.plan, 0
        costs: dict[str, list[expiry_bench.SweepCost]] = {"small": [], "large": []}
        for label, rows in (("small", plan.expiry_background), ("large", plan.expiry_background * 10)):
            started = time.monotonic()
            have = await asyncio.to_thread(expiry_bench.grow_background, self.platform, APP, have, rows)
            say(f"  background memory rows: {have:,} ({time.monotonic() - started:.1f}s to write)")
            for run in range(plan.runs):
                ids = await asyncio.to_thread(
                    expiry_bench.write_expired, self.platform, APP, plan.expiry_rows, plan.expiry_subjects
                )
                cost = await expiry_bench.sweep_cost(
                    self.client, self.settings.task_queue, self.platform, self.counter, have, ids
                )
                say(
                    f"  [expiry run {run + 1}, {have:,} rows] {cost.expired} expired rows in {cost.seconds:.2f}s "
                    f"({cost.seconds_per_row * 1000:.1f} ms/row, {cost.statements_per_row:.1f} SQL/row; "
                    f"{cost.counts.completed} forgets completed)"
                )
                self.figures.add(f"expiry_ms_per_row_{label}", cost.seconds_per_row * 1000)
                self.figures.add(f"expiry_sql_per_row_{label}", cost.statements_per_row)
                costs[label].append(cost)
        for a, b in zip(costs["small"], costs["large"], strict=True):
            self.figures.add("expiry_apart", expiry_bench.apart(a.seconds_per_row, b.seconds_per_row))
        self.figures.notes["expiry_runs"] = [dataclasses.asdict(c) for c in costs["small"] + costs["large"]]

    async def physical(self, label: str, queue: str) -> None:
        """The platform's physical job over every request finished so far (issue 30): one run's wall time, the
        requests it covered, the cost per erased user, and whether it ended within the platform's window."""
        started = time.perf_counter()
        result = await self.client.execute_workflow(
            PHYSICAL_WORKFLOW,
            PhysicalJobInput(fail_on_overdue=False),
            id=f"physical-bench-{label}-{uuid.uuid4().hex[:6]}",
            task_queue=queue,
            result_type=PhysicalResult,
        )
        took = time.perf_counter() - started
        window = self.platform.config.physical_window.total_seconds()
        self.figures.add(f"physical_seconds_{label}", took)
        self.figures.add(f"physical_requests_{label}", float(result.requests))
        self.figures.add(f"physical_attested_{label}", float(result.attested))
        if result.requests:
            self.figures.add(f"physical_seconds_per_request_{label}", took / result.requests)
        self.figures.add(f"physical_window_met_{label}", float(took <= window))
        say(
            f"  physical job ({label}): {result.requests} request(s), {result.attested} attested in {took:.2f}s "
            f"(window {window / 60:.0f} min)"
        )

    async def backlog(self, seeder: Platform) -> None:
        runs = {}
        for workers in (1, 2):
            users = await self.seed(seeder, f"backlog{workers}", self.plan.backlog, "small")
            run = await backlog_bench.backlog_run(
                self.client, self.platform, self.settings, APP, users, workers, self.plan.out_dir / "worker-logs", say
            )
            runs[workers] = run.summary()
            for key, value in runs[workers].items():
                if key not in ("workers", "erasures"):
                    self.figures.add(f"backlog_{key}_{workers}w", float(value))
        self.figures.notes["backlog"] = runs
        if runs[2]["drain_seconds"]:
            self.figures.add("backlog_speedup_2w", ratio(runs[1]["drain_seconds"], runs[2]["drain_seconds"]))

    async def sealing(self) -> None:
        """Figure 7: a memory search over sealed embeddings against plain pgvector, same words, same queries."""
        cost = await asyncio.to_thread(sealing_bench.search_cost, self.platform, APP, self.plan.search_rows)
        say(f"  [search, {cost.rows:,} rows] sealed {cost.sealed_ms:.1f} ms, plain {cost.plain_ms:.1f} ms")
        self.figures.add("search_sealed_ms", cost.sealed_ms)
        self.figures.add("search_plain_ms", cost.plain_ms)
        self.figures.add("search_sealed_ratio", cost.ratio)
        sessions = await sealing_bench.session_cost(self.platform, APP)
        say(
            f"  [session, {sessions.events} events] append {sessions.append_sealed_ms:.2f} ms sealed vs "
            f"{sessions.append_plain_ms:.2f} ms plain; "
            f"load {sessions.load_sealed_ms:.1f} ms vs {sessions.load_plain_ms:.1f} ms"
        )
        self.figures.add("append_sealed_ratio", sessions.append_ratio)
        self.figures.add("load_sealed_ratio", sessions.load_ratio)
        self.figures.add("append_sealed_ms", sessions.append_sealed_ms)
        self.figures.add("load_sealed_ms", sessions.load_sealed_ms)


def _kms_target() -> Target:
    return Target(2)


def rows(f: Figures, plan: Plan) -> list[Row]:
    v = f.values
    big = "large platform"
    out: list[Row] = []

    def add(name: str, key: str, unit: str = "", target: Target | None = None) -> None:
        if v.get(key):
            out.append(Row(name, summarize(v[key]), unit, target))

    add(f"saga wall time, {plan.target_size} user, 10 bg", "saga_seconds_small", "s")
    add(f"direct deletions, {plan.target_size} user, 10 bg", "direct_seconds_small", "s")
    add("  saga's deleting activities (elapsed), 10 bg", "deletion_steps_seconds_small", "s")
    add("  saga's orchestration gaps, 10 bg", "orchestration_gaps_seconds_small", "s")
    # issue 19: a large user within 1.15x of direct; a typical user's fixed cost within 3x
    overhead = Target(1.15) if plan.target_size == "large" else Target(3.0)
    add("1 overhead saga/direct, 10 bg", "overhead_small", "x", overhead)
    add(f"saga wall time, {plan.target_size} user, {plan.background_large} bg", "saga_seconds_large", "s")
    add(f"direct deletions, {plan.background_large} bg", "direct_seconds_large", "s")
    add(f"1 overhead saga/direct, {plan.background_large} bg", "overhead_large", "x", overhead)
    if v.get("saga_seconds_small") and v.get("saga_seconds_large"):
        scaling = [ratio(a, b) for a, b in zip(v["saga_seconds_large"], v["saga_seconds_small"], strict=False)]
        v["scaling"] = scaling
        add(f"2 scaling {plan.background_large} bg / 10 bg", "scaling", "x", Target(1.1))
    add(f"3 throughput, {plan.concurrent} small users", "throughput_per_min", "/min")
    add(f"3 ceiling, {plan.concurrent} no-op sagas", "ceiling_per_min", "/min")
    add("3 throughput share of ceiling", "throughput_share", "", Target(0.8, at_most=False))
    for component in cpu.COMPONENTS:
        add(f"3 CPU s / small erasure: {component}", f"cpu_{component}_per_erasure", "s")
    add("3 Temporal actions / small erasure (history)", "actions_per_small_erasure", "", Target(30))
    add("3 Temporal actions / erasure (history)", "actions_small", "", Target(30))
    add("4 verifier share of saga (2 children)", "verifier_share_small", "")
    add(f"4 verifier share, {big}", "verifier_share_large", "")
    add("4 re-verify / saga time", "reverify_share_small", "")
    add("5 KMS calls / erasure", "calls_kms_calls_small", "", _kms_target())
    add("5 KMS calls / small erasure", "small_calls_kms", "", _kms_target())
    add("5 S3 requests / erasure", "calls_s3_requests_small")
    add("5 S3 listings / erasure", "calls_s3_listings_small")
    volumes = f.notes.get("volumes", {}).get(plan.target_size, {})
    versions = int(volumes.get("artifact_versions", 0))
    add(
        f"5 S3 artifact deletes ({versions} versions)",
        "calls_s3_artifact_deletes_small",
        "",
        Target(max(1, math.ceil(versions / 1000))),
    )
    add("5 S3 log-bucket deletes / erasure", "calls_s3_log_deletes_small")
    add("5 S3 puts / erasure", "calls_s3_puts_small")
    add("5 S3 gets / erasure", "calls_s3_gets_small")
    add("5 SQL statements / erasure", "calls_sql_statements_small")
    add("5 direct: S3 requests", "direct_calls_s3_requests_small")
    add("5 direct: SQL statements", "direct_calls_sql_statements_small")
    add("5 SQL statements saga / direct", "sql_statements_ratio_small", "x", Target(2.0))
    add("5 S3 requests saga / direct", "s3_requests_ratio_small", "x", Target(1.2))
    add("5 activity heartbeats / erasure (estimated, not in history)", "heartbeats_small")
    add("5 cache commands / erasure", "calls_cache_commands_small")
    add("5 direct: cache commands", "direct_calls_cache_commands_small")
    add("5 Chroma opens / erasure", "calls_chroma_opens_small")
    small, large = plan.expiry_background, plan.expiry_background * 10
    add(f"6 expiry sweep per expired row, {small:,} rows", "expiry_ms_per_row_small", "ms")
    add(f"6 expiry sweep per expired row, {large:,} rows", "expiry_ms_per_row_large", "ms")
    add(f"6 expiry cost per row, {large:,} vs {small:,} apart", "expiry_apart", "x", Target(1.2))
    add(f"6 expiry SQL statements / expired row, {small:,}", "expiry_sql_per_row_small")
    add(f"6 expiry SQL statements / expired row, {large:,}", "expiry_sql_per_row_large")
    add(f"7 memory search, {plan.search_rows:,} rows, sealed embeddings", "search_sealed_ms", "ms")
    add(f"7 memory search, {plan.search_rows:,} rows, plain pgvector", "search_plain_ms", "ms")
    add("7 memory search sealed / plain", "search_sealed_ratio", "x", Target(2.0))
    add("7 append an event, sealed session service", "append_sealed_ms", "ms")
    add("7 append an event, sealed / plain google-adk", "append_sealed_ratio", "x")
    add("7 load a session, sealed session service", "load_sealed_ms", "ms")
    add("7 load a session, sealed / plain google-adk", "load_sealed_ratio", "x")
    n = plan.backlog
    for w in (1, 2):
        add(f"8 backlog {n}: drain time, {w} worker process(es)", f"backlog_drain_seconds_{w}w", "s")
        add(
            f"8 backlog {n}: completed, {w} worker process(es)", f"backlog_completed_{w}w", "", Target(n, at_most=False)
        )
        add(f"8 backlog {n}: latency p50, {w} worker(s)", f"backlog_latency_p50_seconds_{w}w", "s")
        add(f"8 backlog {n}: latency p99, {w} worker(s)", f"backlog_latency_p99_seconds_{w}w", "s")
        add(
            f"8 backlog {n}: worker CPU s / erasure, {w} worker(s)", f"backlog_worker_cpu_seconds_per_erasure_{w}w", "s"
        )
        add(f"8 backlog {n}: worker peak RSS, {w} worker(s)", f"backlog_worker_peak_rss_mb_{w}w", "MB")
    add(f"8 backlog {n}: drain 1 worker / 2 workers", "backlog_speedup_2w", "x")
    for label, where in (("small", "10 bg"), ("large", f"{plan.background_large:,} bg"), ("backlog", f"backlog {n}")):
        add(f"10 physical job: one run, {where}", f"physical_seconds_{label}", "s")
        add(f"10 physical job: requests covered, {where}", f"physical_requests_{label}")
        add(f"10 physical job: cost per erased user, {where}", f"physical_seconds_per_request_{label}", "s")
        add(f"10 physical job: run within the window, {where}", f"physical_window_met_{label}", "", Target(1, False))
    add("9 huge user: saga wall time", "saga_seconds_huge", "s")
    add("9 huge user: direct deletions", "direct_seconds_huge", "s")
    add("9 huge user: saga / direct", "overhead_huge", "x", Target(1.2))
    add("9 huge user: longest step", "longest_step_seconds_huge", "s")
    add(
        f"9 huge user: steps longer than the {HEARTBEAT_TIMEOUT.seconds} s heartbeat timeout",
        "steps_past_heartbeat_timeout_huge",
    )
    add("9 huge user: activity retries (every step heartbeats)", "retries_huge", "", Target(0))
    return out


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
            small = await bench.platform_phase(seeder, "small")
            sample = small[0] if small else None
            if sample:
                bench.figures.notes["activities_per_erasure"] = sample.activities
                bench.figures.notes["activity_counts"] = sample.activity_counts
                bench.figures.notes["raw_calls_per_erasure"] = sample.raw_calls
                bench.figures.notes["steps_seconds"] = [[n, round(s, 4)] for n, s in sample.steps]
            await bench.physical("small", physical_queue)
            say(f"phase 2: {plan.background_large:,} background users (beyond the first 10: bulk-seeded)")
            extra = plan.background_large - plan.background_small
            if extra > 0:
                await bench.seed_bulk(seeder, extra, bulk_wrap(settings, seeder, plan.bulk_keys))
            large = await bench.platform_phase(seeder, "large")
            if large:
                bench.figures.notes["steps_seconds_large_platform"] = [[n, round(s, 4)] for n, s in large[0].steps]
            await bench.physical("large", physical_queue)
            say(f"phase 3: throughput, {plan.concurrent} concurrent small users, and the ceiling")
            await bench.throughput(seeder, ceiling_queue)
            say(f"phase 4: expiry sweep cost per expired row, {plan.expiry_rows} expired rows at two table sizes")
            await bench.expiry()
            say(f"phase 5: sealing on the hot paths (memory search over {plan.search_rows:,} rows, append, load)")
            await bench.sealing()
            if plan.huge:
                say("phase 9: a huge user (10x large, bulk-seeded) by saga and its twin directly")
                await bench.huge(seeder, bulk_wrap(settings, seeder, plan.bulk_keys))
            if plan.backlog:
                say(f"phase 6: backlog, {plan.backlog} small erasures filed at once, 1 then 2 worker processes")
                await bench.backlog(seeder)
                await bench.physical("backlog", physical_queue)
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


def write_outputs(
    plan: Plan,
    figures: Figures,
    table: list[Row],
    sample: Erasure | None,
    total: float,
    history: Path | None = results_history.HISTORY,
    echo: Callable[[str], None] = print,
) -> list[Path]:
    """bench.json, one line appended to the results history, and the charts; returns the files written."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    mode = "quick" if plan.quick else "full"
    plan_doc = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(plan).items()}
    doc = {
        "mode": mode,
        "plan": plan_doc,
        "total_seconds": round(total, 1),
        "table": [r.as_dict() for r in table],
        "values": figures.values,
        "notes": figures.notes,
    }
    written = [plan.out_dir / "bench.json"]
    written[0].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    entries: list[results_history.Entry] = []
    if history is not None:
        measured = {k: v for k, v in plan_doc.items() if k != "out_dir"}
        results_history.append(history, results_history.record(mode, measured, table, total))
        written.append(history)
        try:
            entries = results_history.read(history)
        except ValueError as exc:  # an older line damaged (a merge?): this run's line is written, chart the rest
            echo(f"history chart skipped: {exc}")
    return written + draw_charts(plan, figures, table, sample, entries, echo)


def draw_charts(
    plan: Plan,
    figures: Figures,
    table: Sequence[Row],
    sample: Erasure | None,
    entries: Sequence[results_history.Entry],
    echo: Callable[[str], None] = print,
) -> list[Path]:
    """The PNG charts in ``plan.out_dir``: skipped with a note when matplotlib is missing, and a chart that
    fails is reported and skipped (the figures are already written: a chart never costs the run)."""
    try:
        from bench import charts  # matplotlib, from the bench extra
    except ImportError as exc:
        missing = exc.name or "matplotlib"
        echo(f"charts skipped: no {missing} (matplotlib is in the bench extra: pip install -e '.[bench]')")
        return []
    v, out = figures.values, plan.out_dir
    share = next((r.target for r in table if r.name == "3 throughput share of ceiling"), None)
    scale = [
        charts.Scale(plan.background_small, v.get("saga_seconds_small", []), v.get("direct_seconds_small", [])),
        charts.Scale(plan.background_large, v.get("saga_seconds_large", []), v.get("direct_seconds_large", [])),
    ]
    jobs: list[tuple[str, Callable[[Path], Path]]] = []
    if sample:
        title = f"time per step, one {plan.target_size} user erasure"
        gaps = sample.wall - sample.busy
        jobs.append(("steps.png", lambda p: charts.steps(p, sample.steps, sample.wall, gaps, title)))
    if v.get("throughput_per_min") and v.get("ceiling_per_min"):
        tput, ceil, n = v["throughput_per_min"], v["ceiling_per_min"], plan.concurrent
        jobs.append(("throughput.png", lambda p: charts.throughput(p, tput, ceil, n, share.bound if share else None)))
    if any(s.saga for s in scale):
        jobs.append(("scaling.png", lambda p: charts.scaling(p, [s for s in scale if s.saga], plan.target_size)))
    if entries:
        jobs.append(("history.png", lambda p: charts.history(p, entries)))
    written = []
    for name, draw in jobs:
        try:
            written.append(draw(out / name))
        except Exception as exc:  # a chart is a view of figures already written; report it, keep the others
            echo(f"chart {name} skipped: {type(exc).__name__}: {exc}")
    return written


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
    table = rows(figures, plan)
    print(format_table(table))
    print(f"\nactivities per erasure: {figures.notes.get('activities_per_erasure')}; total time {total:.0f}s")
    model = capacity.markdown(capacity.Measured.from_values(figures.values))
    figures.notes["capacity_model"] = model
    print("\ncapacity model (measured per erasure, extrapolated per month):\n" + model)
    written = write_outputs(plan, figures, table, sample, total, history)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0

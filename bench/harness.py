"""The benchmark's harness: the stack's clients, the call counter and the figures, shared by every phase
(``bench.phases``), with the steps they are built from: seeding users and erasing one (by saga or directly)."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import uuid
from collections.abc import Callable

from temporalio.client import Client

from bench.actions import count_actions
from bench.counters import CallCounter, group
from bench.direct import erase_directly
from bench.history import counts_by_name, covered, records, step_times
from bench.measured import Erasure, Figures
from bench.plan import Plan
from bench.quiet import autovacuum_idle
from stores.platform import Platform
from workers.service import file_request, reverify_input
from workers.settings import Settings
from workers.stack.seeding.bulk_check import check_sample
from workers.stack.seeding.bulk_seed import bulk_seed
from workers.stack.seeding.seeder import seed_platform, user_ids
from workflows.contracts.erasure import VERIFIER_WORKFLOW, ErasureResult, VerifyResult

APP = "bench-agent"
#: the saga's activities that delete (the work the direct path also does)
DELETION_STEPS = frozenset({"erase:artifacts", "erase:sessions", "erase:memory", "erase:logs", "erase:keys"})


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Bench:
    """One run's shared state: the stack's clients, the call counter, the figures and the seeding count."""

    def __init__(self, plan: Plan, settings: Settings, platform: Platform, client: Client, counter: CallCounter):
        self.plan = plan
        self.settings = settings
        self.platform = platform
        self.client = client
        self.counter = counter
        self.figures = Figures()
        self.seeded = 0
        self._seed_n = 0

    def next_seed(self) -> int:
        """A fresh number for each seeding: its users' ids and their seeded content differ from every other's."""
        self._seed_n += 1
        return self._seed_n

    # ----- seeding ---------------------------------------------------------------------------------

    async def seed(self, seeder: Platform, label: str, count: int, size: str) -> list[str]:
        seed_n = self.next_seed()
        users = user_ids(count, seed_n, prefix=f"{label}-{uuid.uuid4().hex[:6]}")
        started = time.monotonic()
        report = await seed_platform(seeder, APP, users, size, seed=1000 + seed_n)
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
        seed_n = self.next_seed()
        users = user_ids(count, seed_n, prefix=f"bulk-{uuid.uuid4().hex[:6]}")
        step = max(1, count // 10)

        def progress(message: str) -> None:
            done = int(message.split()[1].split("/")[0])
            if done % step < 1000 or done == count:
                say(f"  {message}")

        report = await bulk_seed(seeder, APP, users, "background", seed=1000 + seed_n, wrap=wrap, progress=progress)
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

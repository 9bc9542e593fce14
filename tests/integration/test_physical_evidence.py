"""Physical clean-up verified by the store's own evidence (issue 28): each under-deletion the verifier could
not see, planted one at a time through the real saga, now fails it, and the raw files agree with the check.

* the vacuum step recording its tables as covered without vacuuming (records only; or "runs" a no-op): the
  ``vacuum`` check fails, and the user_states heap file still holds the erased row's tuple (a line pointer
  still names it);
* the compaction step recording the request as covered without compacting: the ``compaction`` check fails,
  and the deleted artifact's bytes are still in a volume file;
* a deletion by the second sweep after the physical steps (a request run in the order filed before this
  change: physical steps before the sweep): both checks fail, and the files hold what the sweep deleted;
* the real path, the same late writes: the sweep deletes them, the physical steps run after it, every check
  passes, and neither the heap nor the volumes hold them.

Autovacuum is off for the vacuumed tables while this module runs (reset after): an autovacuum that ran
meanwhile would really remove the tuples and rightly pass the check, hiding the planted step.
"""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from activities import request as request_activities
from stores.adapters.interface import AFTER_EVERY_OTHER, Beat, Subject
from stores.adapters.registry import AdapterRegistry
from stores.artifacts.bucket import user_scope_prefix
from stores.infra.seaweedfs import Outcome, SeaweedMaster
from stores.physical import vacuum as vacuum_module
from stores.physical.compaction import CompactionAdapter
from stores.physical.evidence import baselines, mark_deleted
from stores.physical.vacuum import TABLES, VacuumAdapter
from stores.platform import Platform
from stores.privacy.identity import key_part, subject_key
from tests.adapter_wrap import Wrapped, erase_with, open_request, record_approval, registry_with
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.parts import PostgresPart
from workers.stack.seeding.seeder import user_ids
from workers.worker import activity_objects, build_worker
from workflows.contracts.erasure import ERASURE_WORKFLOW, ErasureInput, ErasureResult, PlanStep, workflow_id

pytestmark = [pytest.mark.integration]

APP = "physical-evidence"
PAGE = 8192
SEGMENT_BLOCKS = 131072  # a heap file segment is 1 GiB of 8 KiB pages


# ----- raw files ----------------------------------------------------------------------------------------


def live_tuples_holding(platform: Platform, settings: Settings, table: str, needle: str) -> int:
    """Tuples of ``table``'s heap files that a line pointer still names (``LP_NORMAL``: live, or dead and not
    yet vacuumed) and that hold ``needle``, read from the files after a checkpoint. Bytes a vacuum freed
    but did not overwrite are named by no line pointer and not counted."""
    with platform.pool.connection() as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT pg_relation_filepath(%s::regclass)", (table,)).fetchone()
    assert row is not None
    base = PostgresPart(settings).data_dir / str(row[0])
    files = [base, *sorted(base.parent.glob(f"{base.name}.[0-9]*"))]
    raw, found = needle.encode(), 0
    for path in files:
        data = path.read_bytes()
        for start in range(0, len(data), PAGE):
            page = data[start : start + PAGE]
            if raw not in page:
                continue
            lower = int.from_bytes(page[12:14], "little")  # pd_lower: the end of the line pointer array
            for at in range(24, lower, 4):  # ItemIdData: lp_off:15, lp_flags:2, lp_len:15
                (item,) = struct.unpack_from("<I", page, at)
                off, flags, length = item & 0x7FFF, (item >> 15) & 0x3, item >> 17
                if flags == 1 and raw in page[off : off + length]:
                    found += 1
    return found


def line_pointer_state(platform: Platform, settings: Settings, table: str, ctid: tuple[int, int], needle: str) -> str:
    """What the heap file says of the tuple a deleted row had at ``ctid``, read after a checkpoint: ``live``
        (``LP_NORMAL`` and still holding ``needle``: dead and not yet vacuumed), ``pruned`` (``LP_DEAD``: a read
        of the page pruned its storage, and only a vacuum frees the pointer) or ``freed`` (``LP_UNUSED``, or the
        slot now holds another tuple: a vacuum ran). Opportunistic pruning is not a vacuum (it counts in neither
        ``vacuum_count`` nor ``autovacuum_count``), and which page it visits depends on the page's fill. A page
    or pointer a vacuum truncated away counts as ``freed``."""
    with platform.pool.connection() as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT pg_relation_filepath(%s::regclass)", (table,)).fetchone()
    assert row is not None
    block, offset = ctid
    segment, at_block = divmod(block, SEGMENT_BLOCKS)
    base = PostgresPart(settings).data_dir / str(row[0])
    path = base if segment == 0 else base.with_name(f"{base.name}.{segment}")
    page = b""
    if path.is_file():
        with path.open("rb") as f:
            f.seek(at_block * PAGE)
            page = f.read(PAGE)
    at = 24 + 4 * (offset - 1)
    if len(page) < PAGE or at >= int.from_bytes(page[12:14], "little"):
        return "freed"  # a vacuum truncated the file's empty tail, or the line pointer array
    (item,) = struct.unpack_from("<I", page, at)
    off, flags, length = item & 0x7FFF, (item >> 15) & 0x3, item >> 17
    if flags == 1 and needle.encode() in page[off : off + length]:
        return "live"
    return "pruned" if flags == 3 else "freed"


def volume_hits(settings: Settings, needle: str) -> list[str]:
    """The SeaweedFS data files holding ``needle``'s bytes."""
    root = settings.state_path / "seaweedfs"
    hits = []
    for path in sorted(root.rglob("*")):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except FileNotFoundError:  # a volume file replaced while the scan ran
            continue
        if needle.encode() in data:
            hits.append(str(path.relative_to(root)))
    return hits


# ----- what the plants and late writers put down -------------------------------------------------------


def canary() -> str:
    return f"PHYSCANARY{uuid.uuid4().hex.upper()}"


def plain_user_state(platform: Platform, user: str, word: str) -> tuple[int, int]:
    """A user_states row google-adk's plain service would write (raw id, state in clear): a late writer
    that bypassed the fence, or a row from before sealing. Returns where its tuple went (block, offset)."""
    with platform.pool.connection() as conn:
        row = conn.execute(
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now())"
            " RETURNING ctid::text",
            (APP, user, Jsonb({"note": word})),
        ).fetchone()
    assert row is not None
    block, offset = row[0].strip("()").split(",")
    return int(block), int(offset)


def plain_artifact(platform: Platform, user: str, word: str) -> None:
    """A plain artifact of the user (the word between random bytes, so nothing compresses it)."""
    sk = subject_key(platform.config.subject_secret, APP, user)
    platform.s3.put_object(
        Bucket=platform.config.artifact_bucket,
        Key=f"{user_scope_prefix(APP, sk)}{key_part('user:late.bin')}/0",
        Body=os.urandom(2048) + word.encode() + os.urandom(2048),
        ContentType="application/octet-stream",
    )


@pytest.fixture(scope="module")
def no_autovacuum(platform: Platform) -> Iterator[None]:
    with platform.pool.connection() as conn:
        for table in TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")  # fixed names
    try:
        yield
    finally:
        with platform.pool.connection() as conn:
            for table in TABLES:
                conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


def final_checks(saga: SagaHarness, request_id: str) -> dict[str, dict[str, Any]]:
    body = saga.receipt_body(request_id)
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    return {c["check"]: c for c in final["checks"]}


def failed(checks: Mapping[str, Mapping[str, Any]]) -> set[str]:
    return {name for name, c in checks.items() if not c["passed"]}


# ----- the planted physical steps -----------------------------------------------------------------------


class VacuumRecordsOnly(VacuumAdapter):
    """Records every table as covered and vacuums nothing."""

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        for table in TABLES:
            self.books.record(subject.request_id, table)
        return {"tables_vacuumed": len(TABLES), "tables_covered": 0}


def no_vacuum(table: str) -> Callable[[Any], object]:
    """What ``stores.physical.vacuum._vacuum`` is replaced with: a "run" that vacuums nothing (the step's
    own code keeps its books as if it had)."""
    return lambda _conn: None


class CompactionRecordsOnly(CompactionAdapter):
    """Records the request as covered and compacts nothing."""

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        self.books.record(subject.request_id, "object_store")
        return {"offered": 1, "compactions_run": 1, "volumes_compacted": 1, "volumes_read_only": 0}


class CompactionRunsNothing(CompactionAdapter):
    """The whole step, but its compaction asks SeaweedFS for nothing."""

    @staticmethod
    def _compact(master: SeaweedMaster) -> Outcome:
        return Outcome((), (), ())


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("plant", ["records_only", "runs_nothing"])
async def test_a_vacuum_step_that_records_coverage_without_vacuuming_fails_its_check(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None, plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = (
        VacuumRecordsOnly(saga.platform.store_context)
        if plant == "records_only"
        else VacuumAdapter(saga.platform.store_context)
    )
    if plant == "runs_nothing":
        monkeypatch.setattr(vacuum_module, "_vacuum", no_vacuum)
    platform = saga.platform
    user = user_ids(1, 2811, prefix=f"pvac{plant[:4]}")[0]
    await saga.seed(APP, [user], "small", 2811)
    word = canary()
    ctid = plain_user_state(platform, user, word)
    assert live_tuples_holding(platform, local_stack, "user_states", word) == 1  # the scan sees the row
    request_id, result = await erase_with(saga, registry_with(platform, adapter), APP, user)
    assert result.status == "verification_failed"
    checks = final_checks(saga, request_id)
    assert failed(checks) == {"vacuum"}, checks
    assert checks["vacuum"]["counts"]["tables_not_vacuumed"] == len(TABLES)
    # the books say covered; the heap file agrees with the check: the erased row's tuple was not vacuumed
    assert line_pointer_state(platform, local_stack, "user_states", ctid, word) in {"live", "pruned"}
    with platform.pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM user_states WHERE user_id = %s", (user,)).fetchone() == (0,)


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("planted", [CompactionRecordsOnly, CompactionRunsNothing])
async def test_a_compaction_step_that_records_coverage_without_compacting_fails_its_check(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None, planted: type[CompactionAdapter]
) -> None:
    platform = saga.platform
    user = user_ids(1, 2812, prefix=f"pcmp{planted.__name__[10:14].lower()}")[0]
    await saga.seed(APP, [user], "small", 2812)
    word = canary()
    plain_artifact(platform, user, word)
    assert volume_hits(local_stack, word)  # the scan sees the object's bytes in a volume file
    request_id, result = await erase_with(saga, registry_with(platform, planted(platform)), APP, user)
    assert result.status == "verification_failed"
    checks = final_checks(saga, request_id)
    assert failed(checks) == {"compaction"}, checks
    # the object is gone from the API; its bytes are still in a volume file, as the check says
    hits = volume_hits(local_stack, word)
    assert hits, "the deleted artifact's bytes were expected in a volume file"
    assert all(h.endswith(".dat") for h in hits), hits


def keys_then_late_writes(
    platform: Platform, user: str, words: dict[str, str], placed: dict[str, tuple[int, int]] | None = None
) -> AdapterRegistry:
    """The keys step wrapped: once it returns (the user fenced, every store's first pass done), a late
    writer that bypassed the fence leaves a plain user_states row and a plain artifact; only the second
    sweep deletes them."""

    def write(_subject: Subject) -> None:
        ctid = plain_user_state(platform, user, words["row"])
        if placed is not None:
            placed["row"] = ctid
        plain_artifact(platform, user, words["object"])

    return registry_with(platform, Wrapped(platform.adapters.get("keys"), after_erase=write))


def plan_filed_before(platform: Platform) -> list[PlanStep]:
    """The plan as requests filed before this change carry it: no step after the sweep, and the step that
    runs after every other (keys) waiting for the physical steps too."""
    plan = platform.adapters.plan
    late = [p.name for p in plan if getattr(p, "after_sweep", False)]  # none on the code before
    return [
        PlanStep(
            p.name,
            [*p.after, *late] if AFTER_EVERY_OTHER in platform.adapters.get(p.name).after else list(p.after),
            p.batched,
        )
        for p in plan
    ]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_deletion_by_the_second_sweep_after_the_physical_steps_fails_both_checks(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = saga.platform
    user = user_ids(1, 2813, prefix="psweepold")[0]
    await saga.seed(APP, [user], "small", 2813)
    words = {"row": canary(), "object": canary()}
    placed: dict[str, tuple[int, int]] = {}
    registry = keys_then_late_writes(platform, user, words, placed)
    sk = subject_key(platform.config.subject_secret, APP, user)
    plan = plan_filed_before(platform)
    # the worker's own plan (``begin_request`` since plan-from-worker-v1) as a worker before this change built it
    monkeypatch.setattr(request_activities, "worker_plan", lambda _registry: plan, raising=False)
    request_id, now = open_request(platform, APP, user).request_id, datetime.now(UTC)
    platform.requests.merge_record(request_id, stores=[p.name for p in plan])
    record_approval(platform, request_id, sk)
    queue = f"physical-old-{uuid.uuid4().hex[:8]}"
    objects = activity_objects(platform, load_secrets(saga.settings).signing_key, registry)
    async with build_worker(saga.client, queue, platform, b"", activities=objects):
        handle = await saga.client.start_workflow(
            ERASURE_WORKFLOW,
            ErasureInput(request_id, sk, APP, now.isoformat(), (now + timedelta(days=30)).isoformat(), 0, plan=plan),
            id=workflow_id(request_id),
            task_queue=queue,
            result_type=ErasureResult,
        )
        result = await asyncio.wait_for(handle.result(), 180)
    steps = [s.name for s in result.steps]
    assert steps.index("vacuum") < steps.index("sweep")  # the order such a request runs in
    assert steps.index("compaction") < steps.index("sweep")
    sweep = next(s for s in result.steps if s.name == "sweep")
    assert sweep.counts.get("user_states", 0) >= 1, sweep.counts  # the sweep deleted the late writes
    assert sweep.counts.get("artifacts", 0) >= 1, sweep.counts
    assert result.status == "verification_failed"
    checks = final_checks(saga, request_id)
    assert failed(checks) == {"vacuum", "compaction"}, checks
    assert "deleted again after the evidence was read" in checks["vacuum"]["detail"]
    # the files agree: what the sweep deleted was vacuumed by no one and is still in a volume file
    assert line_pointer_state(platform, local_stack, "user_states", placed["row"], words["row"]) in {"live", "pruned"}
    assert volume_hits(local_stack, words["object"])


@pytest.mark.asyncio(loop_scope="session")
async def test_the_real_path_covers_what_the_second_sweep_deleted_and_the_files_agree(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None
) -> None:
    platform = saga.platform
    user = user_ids(1, 2814, prefix="psweepnew")[0]
    await saga.seed(APP, [user], "small", 2814)
    before = {"row": canary(), "object": canary()}  # found at the start: deleted by the first pass
    plain_user_state(platform, user, before["row"])
    plain_artifact(platform, user, before["object"])
    late = {"row": canary(), "object": canary()}  # written after keys: deleted by the second sweep only
    placed: dict[str, tuple[int, int]] = {}
    request_id, result = await erase_with(saga, keys_then_late_writes(platform, user, late, placed), APP, user)
    sweep = next(s for s in result.steps if s.name == "sweep")
    assert sweep.counts.get("user_states", 0) >= 1, sweep.counts
    assert sweep.counts.get("artifacts", 0) >= 1, sweep.counts
    steps = [s.name for s in result.steps]
    assert steps.index("sweep") < min(steps.index("vacuum"), steps.index("compaction"))
    checks = final_checks(saga, request_id)
    assert result.status == "completed", checks
    assert checks["vacuum"]["counts"] == {"tables_not_vacuumed": 0}
    assert checks["compaction"]["counts"] == {"object_store_not_covered": 0}
    body = saga.receipt_body(request_id)
    dispositions = {d["store"]: d["what"] for d in body["dispositions"]}
    assert dispositions["vacuum"] == dispositions["compaction"] == "physically_removed"
    for words in (before, late):  # the files agree: no tuple names the rows, no volume holds the objects
        assert live_tuples_holding(platform, local_stack, "user_states", words["row"]) == 0
        assert volume_hits(local_stack, words["object"]) == []
    # VACUUM (INDEX_CLEANUP ON) freed the late row's line pointer itself (a prune alone leaves it LP_DEAD)
    state = line_pointer_state(platform, local_stack, "user_states", placed["row"], late["row"])
    assert state == "freed", (state, placed)
    # and the raw scan still sees what is there: a control's row and object, written now
    control = {"row": canary(), "object": canary()}
    plain_user_state(platform, user_ids(1, 2815, prefix="pcontrol")[0], control["row"])
    plain_artifact(platform, user_ids(1, 2815, prefix="pcontrol")[0], control["object"])
    assert live_tuples_holding(platform, local_stack, "user_states", control["row"]) == 1
    assert volume_hits(local_stack, control["object"])


def left(platform: Platform, adapter: VacuumAdapter | CompactionAdapter, subject: Subject, count: str) -> int:
    """What the adapter's check counts as not covered for the request now."""
    record = platform.requests.record(subject.request_id)
    return adapter.remaining(subject, record, None, lambda _d: None).counts[count]


def test_a_retried_step_keeps_its_evidence_and_a_later_deletion_needs_a_later_pass(
    platform: Platform, no_autovacuum: None
) -> None:
    """Direct calls: a retried vacuum or compaction step (its work already done) keeps the baseline it read
    and still passes; a deletion marked after it (a sweep) fails the check until a later pass reads the
    store again and covers it."""
    adapters: list[tuple[VacuumAdapter | CompactionAdapter, dict[str, int], str]] = [
        (VacuumAdapter(platform.store_context), {"user_states": 1}, "tables_not_vacuumed"),
        (CompactionAdapter(platform.store_context), {"artifacts": 1}, "object_store_not_covered"),
    ]
    for adapter, found, count in adapters:
        subject = open_request(platform, APP, user_ids(1, 2816, prefix=f"pretry{adapter.name}")[0])
        platform.requests.update_record(subject.request_id, lambda r, f=found: replace(r, found_at_start=f))

        adapter.erase(subject, {}, lambda _d: None)
        first = baselines(platform.pool, subject.request_id)
        assert left(platform, adapter, subject, count) == 0, adapter.name
        adapter.erase(subject, {}, lambda _d: None)  # a retry after the work was done
        assert baselines(platform.pool, subject.request_id) == first, adapter.name
        assert left(platform, adapter, subject, count) == 0, adapter.name
        mark_deleted(platform.pool, subject.request_id, adapter.after[:1])  # a later pass deleted more
        assert left(platform, adapter, subject, count) >= 1, adapter.name
        adapter.erase(subject, {}, lambda _d: None)
        assert baselines(platform.pool, subject.request_id) != first, adapter.name
        assert left(platform, adapter, subject, count) == 0, adapter.name

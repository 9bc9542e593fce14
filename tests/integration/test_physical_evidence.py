"""Physical clean-up verified by the store's own evidence (issue 28), since issue 30 by the platform's
physical job (the saga no longer vacuums or compacts): each under-deletion the evidence has to catch, planted
one at a time in the job's run, leaves the request pending (no attestation), and the raw files agree.

* the vacuum pass recording its tables as covered without vacuuming (records only; or "runs" a no-op): the
  job's judgement from Postgres's counters leaves the request unattested (``vacuum`` not covered, every
  table), the in-saga ``vacuum`` check of the old plans agrees, and the user_states heap file still holds
  the erased row's tuple (a line pointer still names it);
* the compaction pass recording the request as covered without compacting: ``compaction`` not covered, and
  the deleted artifact's bytes are still in a volume file;
* a deletion by the second sweep after the physical steps (a request run in the order filed before this
  change, physical steps in the saga before the sweep): both in-saga checks fail, and the files hold what
  the sweep deleted;
* the real path, the same late writes: the saga's second sweep deletes them, the files still hold them after
  the saga; a job run whose evidence was read before a later deletion does not cover the request (and the
  files hold what that deletion removed); the next run, reading its evidence after it, covers and attests
  it, and neither the heap nor the volumes hold any of them.

Autovacuum is off for the vacuumed tables while this module runs (reset after): an autovacuum that ran
meanwhile would really remove the tuples and rightly pass the check, hiding the planted pass.
"""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from activities import request as request_activities
from stores.adapters.interface import AFTER_EVERY_OTHER, Beat, Subject
from stores.adapters.registry import AdapterRegistry
from stores.artifacts.bucket import user_scope_prefix
from stores.books import physical_pending
from stores.infra.seaweedfs import Outcome, SeaweedMaster
from stores.physical import evidence
from stores.physical import vacuum as vacuum_module
from stores.physical.cleanup import covered_targets
from stores.physical.compaction import TARGET, CompactionAdapter
from stores.physical.evidence import baselines, mark_deleted
from stores.physical.vacuum import TABLES, VacuumAdapter
from stores.platform import Platform
from stores.privacy.identity import key_part, subject_key
from tests.adapter_wrap import Wrapped, erase_with, open_request, record_approval, registry_with
from tests.saga_harness import SagaHarness
from verifier.receipts.attestation import load_attestation
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
    """The job's pass recording every table as covered for its requests, and vacuuming nothing."""

    def cover_requests(self, request_ids: Sequence[str], beat: Beat) -> dict[str, int]:
        for table in TABLES:
            self.books.record_many(request_ids, table)
        return {"tables_vacuumed": len(TABLES)}


def no_vacuum(table: str) -> Callable[[Any], object]:
    """What ``stores.physical.vacuum._vacuum`` is replaced with: a "run" that vacuums nothing (the pass's
    own code reads its baseline and keeps its books as if it had)."""
    return lambda _conn: None


class CompactionRecordsOnly(CompactionAdapter):
    """The job's pass recording its requests as covered, and compacting nothing."""

    def cover_requests(self, request_ids: Sequence[str], beat: Beat) -> dict[str, int]:
        self.books.record_many(request_ids, TARGET)
        return {"offered": 1, "compactions_run": 1}


class CompactionRunsNothing(CompactionAdapter):
    """The whole pass, but its compaction asks SeaweedFS for nothing."""

    @staticmethod
    def _compact(master: SeaweedMaster) -> Outcome:
        return Outcome((), (), ())


def erased_subject(platform: Platform, request_id: str, user: str) -> Subject:
    """The request's subject as a check after the erasure sees it (the raw id forgotten)."""
    return Subject(request_id, subject_key(platform.config.subject_secret, APP, user), APP)


def assert_left_pending(platform: Platform, request_id: str) -> None:
    """No attestation signed for the request, and the books still owe it a physical pass."""
    assert load_attestation(platform.pool, request_id) is None
    status = physical_pending.status(platform.pool, request_id)
    assert status is not None
    assert status.state == "pending"


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("plant", ["records_only", "runs_nothing"])
async def test_a_vacuum_pass_that_records_coverage_without_vacuuming_leaves_the_request_unattested(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None, plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = saga.platform
    adapter = (
        VacuumRecordsOnly(platform.store_context) if plant == "records_only" else VacuumAdapter(platform.store_context)
    )
    if plant == "runs_nothing":
        monkeypatch.setattr(vacuum_module, "_vacuum", no_vacuum)
    user = user_ids(1, 2811, prefix=f"pvac{plant[:4]}")[0]
    await saga.seed(APP, [user], "small", 2811)
    word = canary()
    ctid = plain_user_state(platform, user, word)
    assert live_tuples_holding(platform, local_stack, "user_states", word) == 1  # the scan sees the row
    result = await saga.erase(APP, user)
    request_id = result.request_id
    assert result.status == "completed"
    assert not failed(final_checks(saga, request_id))
    run = await saga.physical([request_id], adapters=registry_with(platform, adapter))
    assert (run.attested, run.not_covered) == (0, 1)
    assert set(run.not_covered_in(request_id)) == {"vacuum"}, run.coverage
    assert run.attestations[request_id] is None
    assert_left_pending(platform, request_id)
    # the plant's books say every table covered; Postgres's own counters do not, for any table
    assert set(TABLES) <= covered_targets(platform.pool, request_id)
    assert set(evidence.tables_covered(platform.pool, request_id, TABLES, adapter.after).not_covered) == set(TABLES)
    subject = erased_subject(platform, request_id, user)  # the in-saga check old plans run agrees
    assert left(platform, adapter, subject, "tables_not_vacuumed") == len(TABLES)
    # the heap file agrees with the evidence: the erased row's tuple was not vacuumed
    assert line_pointer_state(platform, local_stack, "user_states", ctid, word) in {"live", "pruned"}
    with platform.pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM user_states WHERE user_id = %s", (user,)).fetchone() == (0,)


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("planted", [CompactionRecordsOnly, CompactionRunsNothing])
async def test_a_compaction_pass_that_records_coverage_without_compacting_leaves_the_request_unattested(
    saga: SagaHarness, local_stack: Settings, no_autovacuum: None, planted: type[CompactionAdapter]
) -> None:
    platform = saga.platform
    user = user_ids(1, 2812, prefix=f"pcmp{planted.__name__[10:14].lower()}")[0]
    await saga.seed(APP, [user], "small", 2812)
    word = canary()
    plain_artifact(platform, user, word)
    assert volume_hits(local_stack, word)  # the scan sees the object's bytes in a volume file
    result = await saga.erase(APP, user)
    request_id = result.request_id
    assert result.status == "completed"
    assert not failed(final_checks(saga, request_id))
    adapter = planted(platform.store_context)
    run = await saga.physical([request_id], adapters=registry_with(platform, adapter))
    assert (run.attested, run.not_covered) == (0, 1)
    assert set(run.not_covered_in(request_id)) == {"compaction"}, run.coverage
    assert run.attestations[request_id] is None
    assert_left_pending(platform, request_id)
    assert TARGET in covered_targets(platform.pool, request_id)  # the plant's books say covered
    subject = erased_subject(platform, request_id, user)  # the in-saga check old plans run agrees
    assert left(platform, adapter, subject, "object_store_not_covered") == 1
    # the object is gone from the API; its bytes are still in a volume file, as the evidence says
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
    assert not {"vacuum", "compaction"} & {s.name for s in result.steps}  # the platform's job does them
    checks = final_checks(saga, request_id)
    assert result.status == "completed", checks
    assert not failed(checks), checks
    assert saga.receipt_body(request_id)["physical"]["state"] == "pending"
    # the sweep marked by when it deleted in each store: a pass covers it only with evidence read after that
    for store in ("sessions", "artifacts"):
        assert evidence.last_deletion(platform.pool, request_id, [store]) is not None, store
    # after the saga, before the job: the deleted row's tuple and the object's bytes are still in the files
    assert line_pointer_state(platform, local_stack, "user_states", placed["row"], late["row"]) in {"live", "pruned"}
    assert volume_hits(local_stack, late["object"])

    # a run whose evidence was read before a later deletion of the request (what a second sweep does: each
    # store's sweep, then its deletion marks, ``activities.store_steps``) does not cover the request
    later = {"row": canary(), "object": canary()}
    subject = Subject(request_id, subject_key(platform.config.subject_secret, APP, user), APP, user)

    def deleted_after_the_evidence() -> None:
        placed["later"] = plain_user_state(platform, user, later["row"])
        plain_artifact(platform, user, later["object"])
        deleted_in = {
            name
            for name in ("sessions", "artifacts")
            if any(platform.adapters.get(name).sweep_before(subject, None, None).found.values())
        }
        assert deleted_in == {"sessions", "artifacts"}
        mark_deleted(platform.pool, request_id, deleted_in)

    early = await saga.physical([request_id], before_attest=deleted_after_the_evidence)
    assert (early.attested, early.not_covered) == (0, 1)
    notes = early.not_covered_in(request_id)
    assert set(notes) == {"vacuum", "compaction"}, notes
    assert all("deleted again after the evidence was read" in note for note in notes.values()), notes
    assert_left_pending(platform, request_id)
    # the files agree: what was deleted after that run's passes is in the heap and in a volume file
    assert line_pointer_state(platform, local_stack, "user_states", placed["later"], later["row"]) in {"live", "pruned"}
    assert volume_hits(local_stack, later["object"])

    # the next run reads its evidence after every deletion: it covers the request and signs its attestation
    run = await saga.physical([request_id])
    assert (run.attested, run.not_covered) == (1, 0), run.not_covered_in(request_id)
    attested = run.attestation(request_id)
    assert attested["run"]["id"] == run.run_id
    assert attested["run_after_last_deletion"] is True
    assert {s["store"]: s["covered"] for s in attested["stores"]} == {"vacuum": True, "compaction": True}
    erased = erased_subject(platform, request_id, user)  # the in-saga checks old plans run agree
    assert left(platform, VacuumAdapter(platform.store_context), erased, "tables_not_vacuumed") == 0
    assert left(platform, CompactionAdapter(platform.store_context), erased, "object_store_not_covered") == 0
    for words in (before, late, later):  # the files agree: no tuple names the rows, no volume holds the objects
        assert live_tuples_holding(platform, local_stack, "user_states", words["row"]) == 0
        assert volume_hits(local_stack, words["object"]) == []
    # VACUUM (INDEX_CLEANUP ON) freed the late rows' line pointers itself (a prune alone leaves them LP_DEAD)
    for key, words in (("row", late), ("later", later)):
        state = line_pointer_state(platform, local_stack, "user_states", placed[key], words["row"])
        assert state == "freed", (key, state, placed)
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

"""Postgres's physical clean-up (issue 18; since issue 30 the platform's physical job, no longer a step of the
saga): the job vacuums the tables the erasure's deleting steps touched and attests it from Postgres's own
counters; the receipt says per store what happened to the user's data, what remains where, and that the
physical removal is pending. The adapter's in-saga step and check (which requests filed with the old plans
still run): concurrent erasures share one vacuum, a request that deleted nothing needs none, one whose
vacuum never ran fails."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from stores.adapters.interface import Subject
from stores.physical.vacuum import TABLES, VacuumAdapter
from stores.platform import Platform
from tests.adapter_wrap import open_request
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration]


def _vacuum_counts(platform: Platform) -> dict[str, int]:
    with platform.pool.connection() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE relname = ANY(%s)", (list(TABLES),)
        ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


@pytest.mark.asyncio(loop_scope="session")
async def test_the_physical_job_vacuums_after_the_saga_and_the_receipt_gives_each_stores_disposition(
    saga: SagaHarness,
) -> None:
    app = "vacuum-app"
    target, other = user_ids(2, 131, prefix="vac")
    await saga.seed(app, [target, other], "small", 131)
    result = await saga.erase(app, target)
    assert result.status == "completed"
    steps = {s.name: s for s in result.steps}
    assert not {"vacuum", "compaction"} & set(steps)  # the erasure does not wait for the physical clean-up
    body = saga.receipt_body(result.request_id)
    assert body["physical"]["state"] == "pending"
    dispositions = {d["store"]: d for d in body["dispositions"]}
    assert list(dispositions) == body["stores"]
    assert "vacuum" not in dispositions
    assert dispositions["keys"]["what"] == "unreadable"
    assert dispositions["sessions"]["what"] == "deleted"
    assert "sealed, key destroyed" in dispositions["sessions"]["remains"]
    assert dispositions["sessions"]["counts"] == steps["sessions"].counts
    assert {d["physical"] for d in dispositions.values()} == {"pending"}
    assert target not in str(body)

    # the platform's physical job, run for this request: Postgres vacuums the tables its steps deleted from
    before = _vacuum_counts(saga.platform)
    run = await saga.physical([result.request_id])
    assert (run.attested, run.not_covered) == (1, 0), run.not_covered_in(result.request_id)
    after = _vacuum_counts(saga.platform)
    assert all(after[t] >= before.get(t, 0) for t in TABLES)
    assert sum(after.values()) > sum(before.values())  # VACUUM really ran
    attested = run.attestation(result.request_id)
    stores = {s["store"]: s for s in attested["stores"]}
    assert stores["vacuum"]["covered"]
    vacuum = stores["vacuum"]["evidence"]
    assert set(vacuum["before"]) == set(TABLES)
    for table in TABLES:  # Postgres's own counters show a vacuum of every table since the baseline
        assert vacuum["after"][table]["vacuums"] > vacuum["before"][table]["vacuums"], table
    assert target not in str(attested)
    # the step's own check (what requests filed with the old plans still run) reads the same evidence
    adapter = saga.platform.adapters.get("vacuum")
    assert isinstance(adapter, VacuumAdapter)
    assert adapter.disposition.what == "physically_removed"
    subject = Subject(result.request_id, body["subject_key"], app)
    record = saga.platform.requests.record(result.request_id)
    assert adapter.remaining(subject, record, None, lambda _d: None).counts == {"tables_not_vacuumed": 0}


def test_concurrent_erasures_share_one_vacuum_and_every_request_is_covered(platform: Platform) -> None:
    adapter = VacuumAdapter(platform.store_context)
    subjects = [open_request(platform, "vacuum-share", u) for u in user_ids(2, 132, prefix="share")]
    for s in subjects:  # as if their memory steps had found rows to delete
        platform.requests.update_record(s.request_id, lambda r: replace(r, found_at_start={"memory_rows": 3}))
    waiting = threading.Barrier(len(subjects) + 1)
    results: dict[str, dict[str, int]] = {}
    errors: list[BaseException] = []

    def run(subject: Subject) -> None:
        told: list[bool] = []

        def beat(details: dict[str, Any]) -> None:
            if details.get("waiting_for") == TABLES[0] and not told:
                told.append(True)
                waiting.wait(timeout=30)  # both have fixed their bound and wait for the first table

        try:
            results[subject.request_id] = adapter.erase(subject, {}, beat)
        except BaseException as exc:
            errors.append(exc)

    with platform.pool.connection() as conn:  # hold the first table's lock until both erasures wait for it
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"erasure.vacuum:{TABLES[0]}",))
        threads = [threading.Thread(target=run, args=(s,)) for s in subjects]
        for t in threads:
            t.start()
        waiting.wait(timeout=30)
        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (f"erasure.vacuum:{TABLES[0]}",))
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert sum(r["tables_vacuumed"] for r in results.values()) == len(TABLES)  # one vacuum per table, shared
    for subject in subjects:
        assert adapter.remaining(subject, None, None, lambda _d: None).counts == {"tables_not_vacuumed": 0}  # type: ignore[arg-type]


def test_a_request_that_deleted_nothing_is_covered_without_a_vacuum(platform: Platform) -> None:
    subject = open_request(platform, "vacuum-none", user_ids(1, 134, prefix="none")[0])
    adapter = VacuumAdapter(platform.store_context)
    before = _vacuum_counts(platform)
    assert adapter.erase(subject, {}, lambda _d: None) == {"tables_vacuumed": 0, "tables_covered": 0}
    assert _vacuum_counts(platform) == before
    assert adapter.remaining(subject, None, None, lambda _d: None).counts == {"tables_not_vacuumed": 0}  # type: ignore[arg-type]


def test_a_request_whose_vacuum_never_ran_fails_its_check(platform: Platform) -> None:
    subject = open_request(platform, "vacuum-missing", user_ids(1, 133, prefix="missing")[0])
    remaining = VacuumAdapter(platform.store_context).remaining(subject, None, None, lambda _d: None)  # type: ignore[arg-type]
    assert remaining.counts == {"tables_not_vacuumed": len(TABLES)}

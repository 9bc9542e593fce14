"""Object-store compaction as part of the physical clean-up (issue 18; since issue 30 the platform's physical
job, no longer a step of the saga): after an erasure the bytes of the user's deleted objects are still in the
local SeaweedFS's volume files, and after the job's run they are gone from every file of its data directory,
while a control user's are still found there (so the raw-file scan is shown to work); the same erasure and a
run without compaction (as for an object store that offers none) leave the deleted bytes in the volume
files. The adapter's in-saga step and check (which requests filed with the old plans still run) below."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from stores.artifacts.bucket import user_prefix, user_scope_prefix
from stores.physical.compaction import NOT_OFFERED, OFFERED, TARGET, CompactionAdapter
from stores.platform import Platform
from stores.privacy.identity import key_part, subject_key
from tests.adapter_wrap import open_request, registry_with
from tests.saga_harness import SagaHarness
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform

pytestmark = [pytest.mark.integration]

APP = "compaction-app"


def raw_hits(root: Path, canary: str) -> list[str]:
    """Files under ``root`` holding ``canary`` in UTF-8 or UTF-16 (either byte order), as relative paths."""
    forms = (canary.encode(), canary.encode("utf-16-le"), canary.encode("utf-16-be"))
    found = []
    for path in sorted(root.rglob("*")):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except FileNotFoundError:  # a volume file replaced while the scan ran
            continue
        if any(form in data for form in forms):
            found.append(str(path.relative_to(root)))
    return found


def legacy_artifact(platform: Platform, user: str, canary: str) -> None:
    """Two versions of a plain artifact, as written before artifacts were sealed: the canary between random
    bytes, so the store keeps the body as is (nothing compresses it) and only it is distinctive."""
    sk = subject_key(platform.config.subject_secret, APP, user)
    for version in range(2):
        platform.s3.put_object(
            Bucket=platform.config.artifact_bucket,
            Key=f"{user_scope_prefix(APP, sk)}{key_part('user:notes.bin')}/{version}",
            Body=os.urandom(2048) + canary.encode() + os.urandom(2048),
            ContentType="application/octet-stream",
        )


def versions_left(platform: Platform, user: str) -> int:
    sk = subject_key(platform.config.subject_secret, APP, user)
    page = platform.s3.list_object_versions(Bucket=platform.config.artifact_bucket, Prefix=user_prefix(APP, sk))
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


@pytest.mark.asyncio(loop_scope="session")
async def test_the_physical_jobs_compaction_removes_the_erased_users_bytes_from_the_volume_files(
    saga: SagaHarness, local_stack: Settings
) -> None:
    volumes = local_stack.state_path / "seaweedfs"
    control, uncompacted, target = user_ids(3, 141, prefix="compact")
    await saga.seed(APP, [control], "small", 141)  # the app and a user with sealed data of every kind
    canary = {u: f"CANARY-{uuid.uuid4().hex.upper()}" for u in (control, uncompacted, target)}
    for user in canary:
        legacy_artifact(saga.platform, user, canary[user])
    written = {u: raw_hits(volumes, c) for u, c in canary.items()}
    assert all(written.values()), written  # the scan finds every canary as written, in the volume files
    assert all(p.endswith(".dat") for hits in written.values() for p in hits), written

    # without compaction: the saga alone (it no longer compacts), then the physical job as an object store
    # that offers none runs it; the versions are gone from the API, and their bytes are still in the files
    plain = await saga.erase(APP, uncompacted)
    assert plain.status == "completed"
    assert "compaction" not in {s.name for s in plain.steps}
    assert versions_left(saga.platform, uncompacted) == 0
    assert raw_hits(volumes, canary[uncompacted]), "the saga alone must leave the deleted bytes in the volumes"
    no_compaction = build_platform(local_stack, s3_compaction_url=None)
    try:
        adapter = CompactionAdapter(no_compaction.store_context)
        assert adapter.disposition == NOT_OFFERED
        unoffered = await saga.physical([plain.request_id], adapters=registry_with(saga.platform, adapter))
    finally:
        no_compaction.close()
    assert unoffered.counts["compaction.offered"] == 0
    assert unoffered.counts["compaction.compactions_run"] == 0
    stores = {s["store"]: s for s in unoffered.attestation(plain.request_id)["stores"]}
    assert stores["compaction"]["covered"]
    assert "offers no compaction" in stores["compaction"]["note"]
    left_behind = raw_hits(volumes, canary[uncompacted])
    assert left_behind, "deleted object bytes were expected to stay in the volume files until compacted"

    # with compaction (the local stack's master): after the saga the erased user's bytes are still in the
    # volume files; after the physical job's run they are gone from every file, and so are those the
    # erasure above left (one compaction takes every volume holding garbage)
    result = await saga.erase(APP, target)
    assert result.status == "completed"
    assert "compaction" not in {s.name for s in result.steps}
    assert versions_left(saga.platform, target) == 0
    assert raw_hits(volumes, canary[target]), "the saga alone must leave the deleted bytes in the volumes"
    body = saga.receipt_body(result.request_id)
    assert body["physical"]["state"] == "pending"
    assert "compaction" not in body["stores"]
    assert {d["physical"] for d in body["dispositions"]} == {"pending"}

    run = await saga.physical([result.request_id])
    assert (run.attested, run.not_covered) == (1, 0), run.not_covered_in(result.request_id)
    assert raw_hits(volumes, canary[target]) == []
    assert raw_hits(volumes, canary[uncompacted]) == []
    kept = raw_hits(volumes, canary[control])
    assert kept, "the control's live object must still be found: the scan works after compaction too"
    assert all(p.endswith(".dat") for p in kept), kept
    assert run.counts["compaction.offered"] == 1
    assert run.counts["compaction.compactions_run"] == 1  # no compaction started after its deletions had landed
    attested = run.attestation(result.request_id)
    compaction = {s["store"]: s for s in attested["stores"]}["compaction"]
    assert compaction["covered"]
    evidence = compaction["evidence"]
    assert evidence["before"], evidence  # SeaweedFS's volumes holding the deleted needles, read after they landed
    moved = [v for v, was in evidence["before"].items() if evidence["after"][v]["revision"] > was["revision"]]
    assert len(moved) >= 1, evidence  # compacted since: SeaweedFS's own compaction revisions moved on
    registered = saga.platform.adapters.get("compaction")
    assert isinstance(registered, CompactionAdapter)
    assert (registered.disposition.what, registered.disposition.remains) == (OFFERED.what, OFFERED.remains)
    assert target not in str(body)
    assert target not in str(attested)
    print(  # the figures the report quotes (pytest -s)
        f"\nfiles holding the canary: written {[len(written[u]) for u in canary]}, "
        f"after the erasure without compaction {len(left_behind)}, after compaction "
        f"target {len(raw_hits(volumes, canary[target]))} uncompacted {len(raw_hits(volumes, canary[uncompacted]))} "
        f"control {len(kept)}; run counts {run.counts}; volumes compacted {len(moved)}"
    )


def test_a_request_that_deleted_no_object_is_covered_without_a_compaction(platform: Platform) -> None:
    subject = open_request(platform, APP, user_ids(1, 142, prefix="none")[0])
    adapter = CompactionAdapter(platform.store_context)
    assert adapter.disposition == OFFERED
    counts = adapter.erase(subject, {}, lambda _d: None)
    assert counts == {"compactions_run": 0, "volumes_compacted": 0, "volumes_read_only": 0}
    assert adapter.remaining(subject, None, None, lambda _d: None).counts == {"object_store_not_covered": 0}  # type: ignore[arg-type]


def test_a_request_whose_compaction_never_ran_fails_its_check(platform: Platform) -> None:
    subject = open_request(platform, APP, user_ids(1, 143, prefix="missing")[0])
    remaining = CompactionAdapter(platform.store_context).remaining(subject, None, None, lambda _d: None)  # type: ignore[arg-type]
    assert remaining.counts == {"object_store_not_covered": 1}
    with platform.pool.connection() as conn:  # nor does another request's record, or a vacuum's, count
        conn.execute(
            "INSERT INTO physical_cleanup (request_id, table_name) VALUES (%s, 'events'), (%s, %s)",
            (subject.request_id, f"other-{uuid.uuid4().hex}", TARGET),
        )
    assert CompactionAdapter(platform.store_context).remaining(subject, None, None, lambda _d: None).counts == {  # type: ignore[arg-type]
        "object_store_not_covered": 1
    }

"""The deletion-queue marker on the local SeaweedFS: once ``FilerDeletionQueue.drain`` returns, every chunk
of the objects deleted through S3 before it has left its volume server (the filer deletes them on a 1.123 s
tick, so without the wait most of them would still be served), and the marker leaves no file behind."""

from __future__ import annotations

import os
import time
import uuid

import httpx
import pytest

from stores.infra.seaweedfs import SeaweedMaster
from stores.ledgers.deletion_queue import MARKER_DIRECTORY, FilerDeletionQueue
from stores.physical.compaction import CompactionAdapter
from stores.platform import Platform
from workers.settings import Settings

pytestmark = [pytest.mark.integration]


def chunks_of(filer: str, bucket: str, key: str) -> list[str]:
    reply = httpx.get(f"{filer}/buckets/{bucket}/{key}", params={"metadata": "true"})
    reply.raise_for_status()
    return [str(c["file_id"]) for c in reply.json()["chunks"]]


def test_after_the_marker_every_chunk_deleted_before_it_is_gone(platform: Platform, local_stack: Settings) -> None:
    master_url, filer = local_stack.s3_compaction_master, local_stack.s3_compaction_filer
    assert master_url
    assert filer
    master = SeaweedMaster(master_url)
    queue = FilerDeletionQueue(filer, master)
    bucket = f"drain-{uuid.uuid4().hex[:12]}"
    platform.s3.create_bucket(Bucket=bucket)
    for round_ in range(3):  # a small, a large and a mid-sized batch of deletions, each waited for
        keys = [f"r{round_}/{i}" for i in range((40, 1100, 200)[round_])]
        for key in keys:
            platform.s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(256))
        chunks = [c for key in keys for c in chunks_of(filer, bucket, key)]
        assert len(chunks) == len(keys)
        for start in range(0, len(keys), 1000):
            platform.s3.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True}
            )
        beats: list[float] = []
        drained = queue.drain(time.monotonic() + 60, beats.append)
        still_served = [c for c in chunks if any(master.holds_chunk(s, c) for s in master.locations(c))]
        assert still_served == [], f"round {round_}: {len(still_served)} of {len(chunks)} chunks still served"
        assert drained.servers == 1
        assert all(b >= 0 for b in beats)
    listing = httpx.get(f"{filer}{MARKER_DIRECTORY}/", headers={"Accept": "application/json"})
    assert listing.status_code in (200, 404)
    assert not (listing.json().get("Entries") if listing.status_code == 200 else None)  # every marker deleted


def test_a_marker_whose_volume_server_cannot_be_named_fails_instead_of_passing(local_stack: Settings) -> None:
    """Nothing to poll proves nothing: the drain fails (the step is retried), it never reports the queue done."""
    master_url, filer = local_stack.s3_compaction_master, local_stack.s3_compaction_filer
    assert master_url
    assert filer

    class NoLocations(SeaweedMaster):
        def locations(self, chunk: str) -> list[str]:
            return []

    with pytest.raises(LookupError, match="no volume server"):
        FilerDeletionQueue(filer, NoLocations(master_url)).drain(time.monotonic() + 10, lambda _s: None)


def test_the_local_stacks_compaction_waits_on_the_marker(platform: Platform) -> None:
    adapter = CompactionAdapter(platform.store_context)
    assert adapter.queue is not None  # wired from the settings: the local filer, beside the local master

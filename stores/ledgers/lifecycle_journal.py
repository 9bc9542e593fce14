"""The lifecycle journal: every transition that retires memory content, kept outside the database it protects.

A restored database backup predates what happened after it: a forget, an expiry, an eviction, a correction.
Each such transition therefore writes ``lifecycle/<entry id>.json`` to the receipts bucket (ids, keys,
hashes and times only: the subject key, the app, the memory ids, what superseded them, and for a forget its
tombstone's keyed hashes), and ``erasure replay-tombstones`` replays the whole journal after a restore,
before the restored data goes live (``stores.operations.lifecycle_replay``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PREFIX = "lifecycle/"
#: deleting transitions (the rows must not exist after a replay) and retiring ones (kept, never recalled)
DELETING = ("forgotten", "expired", "evicted", "deleted")
RETIRING = ("superseded",)
EVENTS = (*DELETING, *RETIRING)


@dataclass(frozen=True)
class LifecycleEntry:
    event: str
    subject_key: str
    app_name: str
    memory_ids: list[str]
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    derived_ids: list[str] = field(default_factory=list)
    superseded_by: str | None = None
    #: a forget's tombstone (``ForgetTombstone`` fields: ids and keyed hashes), re-created by the replay
    tombstone: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"unknown lifecycle event {self.event!r}")


class LifecycleJournal:
    def __init__(self, s3: S3Client, bucket: str) -> None:
        self._s3 = s3
        self._bucket = bucket

    def record(self, entry: LifecycleEntry) -> None:
        """Write one entry (a retry writes the same object again: replay is idempotent either way)."""
        self._s3.put_object(
            Bucket=self._bucket,
            Key=f"{PREFIX}{entry.id}.json",
            Body=json.dumps(asdict(entry), sort_keys=True).encode(),
            ContentType="application/json",
        )

    def read_all(self) -> list[LifecycleEntry]:
        entries: list[LifecycleEntry] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=PREFIX):
            for obj in page.get("Contents", []):
                body = self._s3.get_object(Bucket=self._bucket, Key=obj["Key"])["Body"].read()
                entries.append(LifecycleEntry(**json.loads(body)))
        return sorted(entries, key=lambda e: (e.at, e.id))

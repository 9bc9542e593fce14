"""The tombstone journal: every completed erasure's tombstones, kept outside the database it protects.

A restored database backup predates the erasures made after it, so it cannot say what must stay
erased. Each completed request therefore writes ``tombstones/<request id>.json`` to the receipts bucket
(keys and times only: subject key, app, the session ids sealed as in the tombstones, erasure and shred
times; never a session id in clear). ``erasure
replay-tombstones`` reads the journal back after a restore, re-creates the tombstones and ledger rows,
and removes whatever the restore brought back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PREFIX = "tombstones/"


@dataclass(frozen=True)
class JournalEntry:
    request_id: str
    subject_key: str
    app_name: str
    erased_at: str
    keys_shredded_at: str | None
    #: base64 of each session id sealed under the ``session-seal`` key (``stores.ledgers.tombstones.seal_session_id``)
    sealed_sessions: list[str] = field(default_factory=list)
    #: journals written before sealing named sessions in clear; still replayed
    legacy_sessions: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> JournalEntry:
        data = dict(data)
        legacy = data.pop("sessions", None)
        entry = cls(**data)  # type: ignore[arg-type]
        return replace(entry, legacy_sessions=list(legacy)) if isinstance(legacy, list) else entry

    @property
    def erased(self) -> datetime:
        return datetime.fromisoformat(self.erased_at)


def write(s3: S3Client, bucket: str, entry: JournalEntry) -> None:
    s3.put_object(
        Bucket=bucket,
        Key=f"{PREFIX}{entry.request_id}.json",
        Body=json.dumps(asdict(entry), sort_keys=True).encode(),
        ContentType="application/json",
    )


def read_all(s3: S3Client, bucket: str) -> list[JournalEntry]:
    entries: list[JournalEntry] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=PREFIX):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            entries.append(JournalEntry.from_json(json.loads(body)))
    return sorted(entries, key=lambda e: (e.erased_at, e.request_id))

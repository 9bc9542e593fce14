"""The audit log's anchors: one immutable object per append in the receipts bucket, outside the database.

An append writes ``audit/anchors/<seq>-<txid>-<hash>-<mac>.json`` (the entry's number, zero-padded, the
database transaction that wrote it, the entry's hash and a MAC under the audit key over all three) with a
conditional put (``If-None-Match: *``): an anchor is never overwritten, and the console's bucket policy
grants no delete, so the anchors only grow and the newest is the highest number. Everything a check needs
is in the name: ``verify`` reads every anchor with a listing (1,000 a request), no object bodies.

Why the transaction id: the anchor is written inside the entry's transaction (under its lock, so anchors
follow the chain's order) and that transaction can still roll back afterwards (a decision whose entry was
written fails to commit). Such an anchor names an entry that never existed; Postgres knows its
transaction aborted (``pg_xact_status``), which a deleted entry's committed transaction never says. The
next append finds it and records it as void (``audit/voids/<seq>-<txid>-<mac>``, also write-once), so
it stays explained after Postgres has forgotten old transactions.

``audit/head.json`` is the single, overwritten head object that came before (issue 27): read, never
written, so a log anchored that way is carried over (its head is checked like any anchor).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

ANCHORS = "audit/anchors/"
VOIDS = "audit/voids/"
LEGACY_HEAD = "audit/head.json"
_ANCHOR = re.compile(r"^audit/anchors/(\d{12})-(\d{20})-([0-9a-f]{64})-([0-9a-f]{64})\.json$")
_VOID = re.compile(r"^audit/voids/(\d{12})-(\d{20})-([0-9a-f]{64})$")


@dataclass(frozen=True, order=True)
class Anchor:
    """One anchor as its name states it; ``valid`` is false for an object whose name or MAC does not hold
    (then only ``name`` means anything)."""

    seq: int
    txid: int
    hash: str
    name: str
    valid: bool = True


class AnchorStore:
    """The anchors and voids of one audit log, keyed with the log's key (a bucket writer without it cannot
    make an anchor that verifies)."""

    def __init__(self, s3: Any, bucket: str, key: bytes) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._key = key

    def _mac(self, *parts: object) -> str:
        return hmac.new(self._key, "|".join(map(str, parts)).encode(), hashlib.sha256).hexdigest()

    def key_for(self, seq: int, txid: int, digest: str) -> str:
        return f"{ANCHORS}{seq:012d}-{txid:020d}-{digest}-{self._mac('audit-anchor', seq, txid, digest)}.json"

    def parse(self, name: str) -> Anchor | None:
        """The anchor an object name states, ``None`` when the name or its MAC does not hold."""
        m = _ANCHOR.match(name)
        if not m:
            return None
        seq, txid, digest = int(m.group(1)), int(m.group(2)), m.group(3)
        if not hmac.compare_digest(m.group(4), self._mac("audit-anchor", seq, txid, digest)):
            return None
        return Anchor(seq, txid, digest, name)

    def write(self, seq: int, txid: int, digest: str, prev_hash: str) -> Anchor:
        """Anchor entry ``seq``; refused by the store (``ClientError``, 412) if that object exists already."""
        name = self.key_for(seq, txid, digest)
        body = json.dumps({"seq": seq, "txid": txid, "hash": digest, "prev_hash": prev_hash}).encode()
        self._s3.put_object(Bucket=self._bucket, Key=name, Body=body, ContentType="application/json", IfNoneMatch="*")
        return Anchor(seq, txid, digest, name)

    def _names(self, prefix: str, start_after: str | None = None, limit: int | None = None) -> Iterator[str]:
        args: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
        if start_after:
            args["StartAfter"] = start_after
        if limit:
            args["MaxKeys"] = limit
        while True:
            page = self._s3.list_objects_v2(**args)
            for item in page.get("Contents", []):
                yield str(item["Key"])
            if limit or not page.get("IsTruncated"):
                return
            args["ContinuationToken"] = page["NextContinuationToken"]

    def listing(self, from_seq: int = 0) -> list[Anchor]:
        """Every anchor for entry ``from_seq`` and after, in order (invalid objects included, marked)."""
        start = f"{ANCHORS}{from_seq - 1:012d}-~" if from_seq > 0 else None  # '~' sorts after every digit
        found = []
        for name in self._names(ANCHORS, start):
            parsed = self.parse(name)
            found.append(parsed if parsed is not None else Anchor(-1, -1, "", name, valid=False))
        return found

    def any(self) -> bool:
        return next(self._names(ANCHORS, limit=1), None) is not None

    def void(self, anchor: Anchor) -> None:
        """Record that ``anchor``'s transaction aborted (write-once; recorded already is fine)."""
        name = f"{VOIDS}{anchor.seq:012d}-{anchor.txid:020d}-{self._mac('audit-void', anchor.seq, anchor.txid)}"
        try:
            self._s3.put_object(Bucket=self._bucket, Key=name, Body=b"", IfNoneMatch="*")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise

    def voids(self, from_seq: int = 0) -> set[tuple[int, int]]:
        """(seq, txid) of every anchor for entry ``from_seq`` and after recorded void (records that verify)."""
        out = set()
        for name in self._names(VOIDS, f"{VOIDS}{from_seq - 1:012d}-~" if from_seq > 0 else None):
            m = _VOID.match(name)
            if m and hmac.compare_digest(m.group(3), self._mac("audit-void", int(m.group(1)), int(m.group(2)))):
                out.add((int(m.group(1)), int(m.group(2))))
        return out

    def legacy_head(self) -> tuple[int, str] | None:
        """(seq, hash) of the single head object written before per-append anchors; ``None`` when there is
        none; ``ValueError`` when it does not verify."""
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=LEGACY_HEAD)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None
        doc = json.loads(body)
        seq, digest = int(doc["seq"]), str(doc["hash"])
        if not hmac.compare_digest(str(doc.get("mac", "")), self._mac(f"audit-head|{seq}|{digest}")):
            raise ValueError("the anchored head's MAC does not verify")
        return seq, digest

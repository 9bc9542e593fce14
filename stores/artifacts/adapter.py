"""Adapter for the S3 artifact bucket: every object version and delete marker under the subject's prefix.

The key layout puts every session scope and the ``user:`` scope of a user under one prefix named by the
subject key (``stores.artifacts.bucket``), so one listing pass reaches them all, stranded ones included. Deletes
go through ``stores.infra.s3_batch`` (a reply listing errors is a failure), a heartbeat per batch; a retry lists
again and finds only what is left, and the cursor carries the count so far. Incomplete multipart uploads
under the prefix (their parts hold the user's bytes, and no version listing shows them) are aborted first,
and the check lists them too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from stores.adapters.common import digest
from stores.adapters.interface import (
    Beat,
    Bound,
    DataClaims,
    Disposition,
    ForgetScope,
    ItemsCheck,
    Remaining,
    Subject,
    Swept,
)
from stores.artifacts.bucket import ArtifactEraser, session_prefix, user_prefix

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord


class ArtifactReads:
    """The verifier's listing: object versions and delete markers under the subject's prefix."""

    def __init__(self, context: StoreContext) -> None:
        self._s3 = context.s3
        self._bucket = context.buckets.artifacts

    def artifact_entries(self, app_name: str, subject: str, before: datetime | None) -> dict[str, int]:
        versions = markers = 0
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": user_prefix(app_name, subject)}
        while True:
            page: Any = self._s3.list_object_versions(**kwargs)
            versions += sum(1 for v in page.get("Versions", []) if before is None or v["LastModified"] < before)
            markers += sum(1 for m in page.get("DeleteMarkers", []) if before is None or m["LastModified"] < before)
            if not page.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")
        return {
            "object_versions": versions,
            "delete_markers": markers,
            "incomplete_uploads": self.incomplete_uploads(app_name, subject, before),
        }

    def incomplete_uploads(self, app_name: str, subject: str, before: datetime | None) -> int:
        """Multipart uploads under the subject's prefix never completed nor aborted (started before
        ``before``, when given: later ones belong to a returning user)."""
        prefix = user_prefix(app_name, subject)
        found = 0
        for page in self._s3.get_paginator("list_multipart_uploads").paginate(Bucket=self._bucket, Prefix=prefix):
            found += sum(
                1
                for u in page.get("Uploads", [])
                if u.get("Key", "").startswith(prefix) and (before is None or u["Initiated"] < before)
            )
        return found


class ArtifactsAdapter:
    name = "artifacts"
    after: tuple[str, ...] = ()
    batched = True
    disposition = Disposition(
        "deleted",
        "every object version and delete marker deleted; the object store keeps deleted bytes until it "
        "compacts and bucket backups keep them: artifact bodies sealed, key destroyed; object keys hold "
        "subject keys and session ids",
    )

    def __init__(self, context: StoreContext) -> None:
        self.s3, self.bucket, self.secret = context.s3, context.buckets.artifacts, context.subject_secret
        self.artifacts = ArtifactEraser(context.s3, context.buckets.artifacts, context.pool, context.s3_delete_batch)
        self.reads = ArtifactReads(context)

    def locate(self, subject: Subject) -> dict[str, int]:
        listing = self.s3.list_objects_v2(
            Bucket=self.bucket,
            Prefix=user_prefix(subject.app_name, subject.subject_key),
            MaxKeys=1,
        )
        return {"artifacts": int(listing.get("KeyCount", 0))}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        base, batches = int(cursor.get("removed", 0)), int(cursor.get("batches", 0))
        resumed = int(batches > 0 or "uploads" in cursor)
        artifacts = self.artifacts
        # uploads first: one completed behind the version listing would leave a new object version
        uploads = int(cursor.get("uploads", 0)) + artifacts.abort_uploads_of(subject.app_name, subject.subject_key)
        beat({"removed": base, "batches": batches, "uploads": uploads})

        def progress(n: int) -> None:
            nonlocal batches
            batches += 1
            beat({"removed": base + n, "batches": batches, "uploads": uploads})

        removed = artifacts.erase_everything_of(subject.app_name, subject.subject_key, on_batch=progress)
        return {
            "objects": base + removed,  # object versions and delete markers, every scope
            "incomplete_uploads": uploads,  # multipart uploads aborted (their parts with them)
            "delete_requests": batches,
            "resumed_from_heartbeat": resumed,
        }

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        before = bound.s3_cutoff if bound else None
        return Remaining(self.reads.artifact_entries(subject.app_name, subject.subject_key, before))

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        # S3 LastModified has one-second resolution: only objects clearly older than the erasure count
        older = None if before is None else before.replace(microsecond=0) - timedelta(seconds=1)
        artifacts = self.artifacts
        found = artifacts.abort_uploads_of(subject.app_name, subject.subject_key, initiated_before=older)
        found += artifacts.erase_everything_of(subject.app_name, subject.subject_key, modified_before=older)
        return Swept({"artifacts": found})  # object versions, delete markers and incomplete uploads

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        from stores.privacy.identity import subject_key

        s3, bucket = self.s3, self.bucket
        sk = subject_key(self.secret, app_name, user_id)
        objects = []
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=user_prefix(app_name, sk)):
            for v in page.get("Versions", []):
                body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                objects.append((v["Key"], v["VersionId"], hashlib.sha256(body).hexdigest()))
            objects += [(m["Key"], m["VersionId"], "marker") for m in page.get("DeleteMarkers", [])]
        return {"artifacts": digest(sorted(objects)), "counts": {"artifacts": len(objects)}}

    # ----- item forgetting (``ItemForgetting``): a session erasure removes the session's artifacts -------

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """A session erasure: every version and delete marker under the session's prefix, through the gated
        ``erase_prefix`` (a heartbeat per batch). Item forgets: artifacts hold no memory items."""
        session_id = scope.erased_session()
        if session_id is None:
            return {}
        versions = self.artifacts.erase_prefix(
            session_prefix(scope.app_name, scope.subject_key, session_id), on_batch=lambda n: beat({"versions": n})
        )
        return {"artifact_versions": versions}

    def items_left(self, scope: ForgetScope) -> int:
        """Object versions and delete markers left under the erased session's prefix (its own listing)."""
        session_id = scope.erased_session()
        if session_id is None:
            return 0
        return self.artifacts.count_prefix(session_prefix(scope.app_name, scope.subject_key, session_id)).total

    def items_check(self, scope: ForgetScope) -> ItemsCheck | None:
        """Checked for a session erasure only, under the name the forget's receipts have always used."""
        return ItemsCheck("artifacts", "versions_left") if scope.erased_session() else None

    def claims(self) -> DataClaims:
        """The data map: the bucket's top-level prefix every user's objects live under (``user_prefix``)."""
        top = user_prefix("app", "sk_" + "0" * 40).split("/", 1)[0]
        return DataClaims(prefixes=(f"{self.bucket}/{top}/",))

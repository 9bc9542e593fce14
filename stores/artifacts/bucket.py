"""Artifacts in S3: the key layout and the erase adapter that removes every version and marker.

Key layout::

    a/<app>/<subject key>/sessions/<session>/<filename>/<version>     session-scoped artifacts
    a/<app>/<subject key>/user/<filename>/<version>                   ``user:``-prefixed, user-wide artifacts

The user is named by the subject key (a fixed-length keyed hash of app and user id), so no user's prefix
can ever match another user's (``bob`` vs ``bob/x``, ``bob%``, look-alikes all hash apart), object keys
carry no raw identifier, and the verifier and scheduled sweeps can find the objects after the raw id has
been forgotten. Session ids and filenames are percent-encoded (``/``, ``%``, ``*`` all escaped).

Blobs are the ADK ``Part`` as JSON, sealed with the user's data key (AES-256-GCM); the data key id is in
the blob header and in the object's metadata. Works on versioned and unversioned buckets: the erase
adapter lists object versions and delete markers under one scope prefix at a time and removes them with
``DeleteObjects`` in batches of at most 1,000 keys.

An upload started and never completed (``CreateMultipartUpload`` without ``CompleteMultipartUpload``) is
no object version, yet the store keeps its parts, the user's bytes, until it is aborted: the eraser lists
the incomplete uploads under the user's prefix (``ListMultipartUploads``, exactly that prefix) and aborts
each, before it deletes the objects so that none completes into a new object behind the listing.

Every delete is gated (``stores.ledgers.owner_holds.gated``): the owner is the subject key the prefix names;
each batch's ``DeleteObjects`` (and the aborts) run while the owner's hold lock is held shared in a
transaction that read the owner's hold, and a hold (``OwnerHeld``) stops the erase before the next batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.infra.s3_batch import delete_versions
from stores.ledgers.owner_holds import gated
from stores.privacy.identity import key_part, validate_app_name, validate_id, validate_subject_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BATCH = 1000
USER_SCOPE_PREFIX = "user:"


def user_prefix(app_name: str, subject: str) -> str:
    return f"a/{key_part(validate_app_name(app_name))}/{validate_subject_key(subject)}/"


def owner_of(prefix: str) -> str:
    """The subject key a user or session prefix names (``a/<app>/<subject key>/...``): whose hold gates it."""
    parts = prefix.split("/")
    if len(parts) < 4 or parts[0] != "a":
        raise ValueError("not an artifact prefix of one user")
    return validate_subject_key(parts[2])


def session_prefix(app_name: str, subject: str, session_id: str) -> str:
    return f"{user_prefix(app_name, subject)}sessions/{key_part(validate_id(session_id, 'session id'))}/"


def user_scope_prefix(app_name: str, subject: str) -> str:
    return f"{user_prefix(app_name, subject)}user/"


def artifact_prefix(app_name: str, subject: str, filename: str, session_id: str | None) -> str:
    validate_id(filename, "filename")
    if filename.startswith(USER_SCOPE_PREFIX) or session_id is None:
        return f"{user_scope_prefix(app_name, subject)}{key_part(filename)}/"
    return f"{session_prefix(app_name, subject, session_id)}{key_part(filename)}/"


# ----- erase adapter -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeListing:
    versions: int
    delete_markers: int

    @property
    def total(self) -> int:
        return self.versions + self.delete_markers


class ArtifactEraser:
    """Removes every object version and delete marker under one user's scopes, 1,000 keys a request."""

    def __init__(self, s3: S3Client, bucket: str, pool: ConnectionPool, batch: int = BATCH) -> None:
        if not 1 <= batch <= BATCH:
            raise ValueError(f"delete batch must be 1..{BATCH}")
        self._s3 = s3
        self._bucket = bucket
        self._pool = pool  # the hold store's: every delete is gated on the owner's hold
        self._batch = batch

    def _entries(
        self, prefix: str, modified_before: datetime | None = None
    ) -> Iterator[tuple[list[dict[str, str]], int, int]]:
        """Pages of (delete entries, versions, markers) under a prefix (optionally only older ones)."""
        pages = self._s3.get_paginator("list_object_versions").paginate(
            Bucket=self._bucket, Prefix=prefix, PaginationConfig={"PageSize": BATCH}
        )
        for page in pages:
            entries: list[dict[str, str]] = []
            versions = page.get("Versions", [])
            markers = page.get("DeleteMarkers", [])
            if modified_before is not None:
                versions = [v for v in versions if v["LastModified"] < modified_before]
                markers = [m for m in markers if m["LastModified"] < modified_before]
            for item in [*versions, *markers]:
                entry = {"Key": item["Key"]}
                if item.get("VersionId") and item["VersionId"] != "null":
                    entry["VersionId"] = item["VersionId"]
                entries.append(entry)
            if entries:
                yield entries, len(versions), len(markers)

    def erase_prefix(
        self, prefix: str, on_batch: Callable[[int], None] | None = None, modified_before: datetime | None = None
    ) -> int:
        """Delete every version and marker under ``prefix``; idempotent. Returns entries removed."""
        owner = owner_of(prefix)
        removed = 0
        pending: list[dict[str, str]] = []

        def flush() -> None:
            nonlocal removed, pending
            for start in range(0, len(pending), self._batch):  # one DeleteObjects request per gate
                with gated(self._pool, [owner]):  # the owner's hold, read while this batch goes
                    removed += delete_versions(
                        self._s3, self._bucket, pending[start : start + self._batch], batch=self._batch
                    )
                if on_batch:
                    on_batch(removed)
            pending = []

        for entries, _v, _m in self._entries(prefix, modified_before):
            pending.extend(entries)
            if len(pending) >= self._batch:
                flush()
        flush()
        return removed

    def count_prefix(self, prefix: str) -> ScopeListing:
        versions = markers = 0
        for _entries, v, m in self._entries(prefix):
            versions += v
            markers += m
        return ScopeListing(versions, markers)

    def erase_everything_of(
        self,
        app_name: str,
        subject: str,
        on_batch: Callable[[int], None] | None = None,
        modified_before: datetime | None = None,
    ) -> int:
        """The whole user prefix: catches artifacts of sessions that no longer exist (stranded)."""
        return self.erase_prefix(user_prefix(app_name, subject), on_batch, modified_before)

    def uploads(self, prefix: str, initiated_before: datetime | None = None) -> Iterator[tuple[str, str]]:
        """(key, upload id) of every incomplete multipart upload under ``prefix`` (optionally only those
        started before a time), listed by prefix: cost follows the user's uploads, not the bucket's."""
        pages = self._s3.get_paginator("list_multipart_uploads").paginate(Bucket=self._bucket, Prefix=prefix)
        for page in pages:
            for upload in page.get("Uploads", []):
                key, upload_id = upload.get("Key", ""), upload.get("UploadId", "")
                if not key.startswith(prefix) or not upload_id:
                    continue  # never another prefix's, whatever a store answers
                started = upload.get("Initiated")
                if initiated_before is not None and (started is None or started >= initiated_before):
                    continue
                yield key, upload_id

    def abort_uploads(self, prefix: str, initiated_before: datetime | None = None) -> int:
        """Abort every incomplete multipart upload under ``prefix`` (its parts go with it); idempotent (one
        already gone is not counted). Returns uploads aborted."""
        found = list(self.uploads(prefix, initiated_before))
        if not found:
            return 0
        with gated(self._pool, [owner_of(prefix)]):
            return self._abort(found)

    def _abort(self, found: list[tuple[str, str]]) -> int:
        aborted = 0
        for key, upload_id in found:
            try:
                self._s3.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
            except self._s3.exceptions.NoSuchUpload:
                continue  # completed or aborted since the listing: a completed one is an object version
            aborted += 1
        return aborted

    def abort_uploads_of(self, app_name: str, subject: str, initiated_before: datetime | None = None) -> int:
        """Every incomplete multipart upload under the user's prefix, every scope."""
        return self.abort_uploads(user_prefix(app_name, subject), initiated_before)

    def count_user(self, app_name: str, subject: str) -> ScopeListing:
        """Everything under the user's prefix: every session scope and the user scope."""
        return self.count_prefix(user_prefix(app_name, subject))

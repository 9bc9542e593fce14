"""The one S3 batch-delete helper: a reply listing ``Errors`` is a failure, never a success."""

from __future__ import annotations

from typing import Any

import pytest

from stores.infra.errors import PartialDelete
from stores.infra.s3_batch import delete_versions


class FakeS3:
    """Records every DeleteObjects request; answers with the errors it is told to, for the keys named."""

    def __init__(self, failing: dict[str, str] | None = None) -> None:
        self.failing = failing or {}
        self.requests: list[list[dict[str, str]]] = []
        self.deleted: list[str] = []

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        objects = Delete["Objects"]
        self.requests.append(objects)
        errors = [{"Key": o["Key"], "Code": self.failing[o["Key"]]} for o in objects if o["Key"] in self.failing]
        self.deleted += [o["Key"] for o in objects if o["Key"] not in self.failing]
        return {"Errors": errors} if errors else {}


def entries(n: int) -> list[dict[str, str]]:
    return [{"Key": f"k{i:05d}", "VersionId": "v1"} for i in range(n)]


def test_batches_of_at_most_a_thousand_and_progress_per_batch() -> None:
    s3, seen = FakeS3(), []
    assert delete_versions(s3, "b", entries(2500), batch=5000, on_batch=seen.append) == 2500  # type: ignore[arg-type]
    assert [len(r) for r in s3.requests] == [1000, 1000, 500]
    assert seen == [1000, 2000, 2500]


def test_a_reply_with_transient_errors_raises_partial_delete() -> None:
    s3 = FakeS3({"k00003": "InternalError", "k00004": "SlowDown"})
    with pytest.raises(PartialDelete, match="did not delete 2 keys: InternalError, SlowDown") as err:
        delete_versions(s3, "b", entries(10))  # type: ignore[arg-type]
    assert "k0000" not in str(err.value)  # codes and a count, never a key (keys name subjects)


def test_a_refusal_raises_permission_error_and_stops_before_the_next_batch() -> None:
    s3 = FakeS3({"k00001": "AccessDenied"})
    with pytest.raises(PermissionError, match="AccessDenied"):
        delete_versions(s3, "b", entries(30), batch=10)  # type: ignore[arg-type]
    assert len(s3.requests) == 1  # nothing more is attempted once a batch failed


def test_nothing_to_delete_sends_nothing() -> None:
    s3 = FakeS3()
    assert delete_versions(s3, "b", []) == 0  # type: ignore[arg-type]
    assert s3.requests == []

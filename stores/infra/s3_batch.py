"""One batch-delete helper for every S3 deletion (artifacts, log segment versions, restore clean-up).

``DeleteObjects`` answers 200 even when some keys were not deleted: the reply's ``Errors`` lists them.
Treating that reply as success would report an erasure that did not happen, so a reply with errors is
always a failure: ``AccessDenied`` (no retry can fix it) raises ``PermissionError``, any other code
(``InternalError``, ``SlowDown``, ...) raises ``PartialDelete``, which the activity layer retries. The keys
that were deleted stay deleted; a retry lists again and finds only the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from stores.infra.errors import PartialDelete

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MAX_BATCH = 1000  # the most keys one DeleteObjects request may name
_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "AllAccessDisabled"})


def delete_versions(
    s3: S3Client,
    bucket: str,
    entries: Sequence[dict[str, str]],
    *,
    batch: int = MAX_BATCH,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Delete these ``{"Key", "VersionId"}`` entries, ``batch`` per request; returns how many went.

    Raises ``PermissionError`` or ``PartialDelete`` (naming only error codes and a count, never a key) as
    soon as one reply lists errors; ``on_batch`` gets the running total after every fully deleted batch.
    """
    size = max(1, min(batch, MAX_BATCH))
    removed = 0
    for start in range(0, len(entries), size):
        chunk = list(entries[start : start + size])
        reply: Any = s3.delete_objects(
            Bucket=bucket,
            Delete={"Objects": chunk, "Quiet": True},  # type: ignore[typeddict-item]
        )
        errors = reply.get("Errors") or []
        if errors:
            raise_for_errors(errors)
        removed += len(chunk)
        if on_batch:
            on_batch(removed)
    return removed


def raise_for_errors(errors: Sequence[dict[str, Any]]) -> None:
    """The failure a ``DeleteObjects`` reply's ``Errors`` means (PII-free: codes and a count only)."""
    codes = sorted({str(e.get("Code", "?")) for e in errors})
    message = f"S3 did not delete {len(errors)} keys: {', '.join(codes)}"
    if set(codes) <= _DENIED:
        raise PermissionError(message)
    raise PartialDelete(message)

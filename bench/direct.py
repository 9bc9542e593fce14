"""The raw limit: the same deletions an erasure makes, done directly, with no orchestration, fence,
verification or receipt. Indexed keys only, as the saga's own stores use them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from stores.artifacts.bucket import BATCH, user_prefix
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.response_cache.cache import entry_key, index_key


@dataclass(frozen=True)
class DirectResult:
    events: int
    sessions: int
    user_states: int
    memories: int
    object_versions: int
    log_segments: int
    log_lines: int
    data_keys: int
    cached_responses: int = 0
    chroma_files: int = 0


def erase_directly(platform: Platform, app_name: str, user_id: str) -> DirectResult:
    sk = subject_key(platform.config.subject_secret, app_name, user_id)
    filed = [sk, user_id]  # google-adk rows: under the subject key (sealed service), or the raw id (plain)
    with platform.pool.connection() as conn, conn.transaction():
        events = conn.execute(
            "DELETE FROM events WHERE app_name = %s AND user_id = ANY(%s)", (app_name, filed)
        ).rowcount
        sessions = conn.execute(
            "DELETE FROM sessions WHERE app_name = %s AND user_id = ANY(%s)", (app_name, filed)
        ).rowcount
        states = conn.execute(
            "DELETE FROM user_states WHERE app_name = %s AND user_id = ANY(%s)", (app_name, filed)
        ).rowcount
        memories = conn.execute("DELETE FROM memories WHERE subject_key = %s", (sk,)).rowcount

    bucket = platform.config.artifact_bucket
    removed = 0
    pending: list[dict[str, str]] = []

    def flush(limit: int) -> None:
        nonlocal pending, removed
        while len(pending) >= limit and pending:
            batch, pending = pending[:BATCH], pending[BATCH:]
            platform.s3.delete_objects(
                Bucket=bucket,
                Delete={"Objects": batch, "Quiet": True},  # type: ignore[typeddict-item]
            )
            removed += len(batch)

    pages = platform.s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, Prefix=user_prefix(app_name, sk), PaginationConfig={"PageSize": BATCH}
    )
    for page in pages:
        for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
            pending.append({"Key": item["Key"], "VersionId": item["VersionId"]})
        flush(BATCH)
    flush(1)

    segments, lines = platform.logs.purge_user(app_name, user_id, sk)
    cached = 0
    if platform.config.cache_url:  # the user's cached responses: every entry its index names, then the index
        client, index = platform.response_cache.client, index_key(app_name, sk)
        digests = [d.decode() for d in client.zrange(index, 0, -1)]
        for start in range(0, len(digests), 500):
            cached += int(client.unlink(*(entry_key(app_name, sk, d) for d in digests[start : start + 500])))
        client.unlink(index)
    chroma_files = 0
    if platform.config.chroma_path:  # the user's Chroma database: its directory, every file in it
        directory = platform.chroma_memory.directory(sk)
        if directory.exists():
            chroma_files = sum(1 for p in directory.rglob("*") if p.is_file())
            shutil.rmtree(directory)
    with platform.pool.connection() as conn:
        keys = conn.execute("DELETE FROM data_keys WHERE subject_key = %s", (sk,)).rowcount
    return DirectResult(events, sessions, states, memories, removed, segments, lines, keys, cached, chroma_files)

"""Per-user fingerprints of every store, read directly (SQL, S3 version listings).

Used to show that users other than the erased one stay byte-identical (demo, tests). Reads by indexed
lookups per user; meant for a handful of users, not the whole platform.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from stores.artifacts import user_prefix
from stores.identity import subject_key
from stores.platform import Platform


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def user_snapshot(platform: Platform, app: str, user: str) -> dict[str, Any]:
    sk = subject_key(platform.config.subject_secret, app, user)
    with platform.pool.connection() as conn:
        sessions = conn.execute(
            "SELECT id, state::text, create_time, update_time FROM sessions "
            "WHERE app_name=%s AND user_id=%s ORDER BY id",
            (app, user),
        ).fetchall()
        events = conn.execute(
            "SELECT id, session_id, event_data::text, timestamp FROM events WHERE app_name=%s AND user_id=%s "
            "ORDER BY session_id, id",
            (app, user),
        ).fetchall()
        user_state = conn.execute(
            "SELECT state::text, update_time FROM user_states WHERE app_name=%s AND user_id=%s", (app, user)
        ).fetchall()
        memories = conn.execute(
            "SELECT id, kind, session_id, derived_from, source_sessions, key_id, content_sealed, token_digests, "
            "embedding::text, created_at FROM memories WHERE app_name=%s AND user_id=%s ORDER BY id",
            (app, user),
        ).fetchall()
        keys = conn.execute(
            "SELECT key_id, version, wrapped_key FROM data_keys WHERE subject_key=%s ORDER BY version", (sk,)
        ).fetchall()
        log_index = conn.execute(
            "SELECT segment_key, line_count FROM log_subject_index WHERE subject_key=%s ORDER BY segment_key", (sk,)
        ).fetchall()
    objects = []
    for page in platform.s3.get_paginator("list_object_versions").paginate(
        Bucket=platform.config.artifact_bucket, Prefix=user_prefix(app, sk)
    ):
        for v in page.get("Versions", []):
            body = platform.s3.get_object(
                Bucket=platform.config.artifact_bucket, Key=v["Key"], VersionId=v["VersionId"]
            )["Body"].read()
            objects.append((v["Key"], v["VersionId"], hashlib.sha256(body).hexdigest()))
        objects += [(m["Key"], m["VersionId"], "marker") for m in page.get("DeleteMarkers", [])]
    log_lines = [json.dumps(r, sort_keys=True) for r in platform.logs.lines_of(sk, app, [s for s, _n in log_index])]
    return {
        "sessions": _digest(sessions),
        "events": _digest(events),
        "user_state": _digest(user_state),
        "memories": _digest(memories),
        # per row, so a comparison can allow exactly the derived rows an erasure lists as removed
        "memory_rows": {str(m[0]): _digest(m) for m in memories},
        "keys": _digest(keys),
        "log_index": _digest(log_index),
        "artifacts": _digest(sorted(objects)),
        "log_lines": _digest(sorted(log_lines)),
        "counts": {
            "sessions": len(sessions),
            "events": len(events),
            "user_state": len(user_state),
            "memories": len(memories),
            "keys": len(keys),
            "log_segments": len(log_index),
            "artifacts": len(objects),
            "log_lines": len(log_lines),
        },
    }


def snapshot(platform: Platform, app: str, users: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {u: user_snapshot(platform, app, u) for u in users}

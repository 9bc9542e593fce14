"""What a subject holds in each store when a request begins: bounded, indexed probes only.

Used to say plainly when nothing was found (an id the platform never stored, or stored under another
spelling) instead of completing with zero counts as if an erasure had happened, and to find the other
spellings of an id (trimmed, Unicode-normalised) that hold data of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from stores.artifacts import user_prefix
from stores.platform import Platform

#: Probes stop at this many rows per store: the figure says "at least", the cost stays flat.
PROBE_LIMIT = 1000


def presence(platform: Platform, app_name: str, user_id: str, subject: str) -> dict[str, int]:
    """Rows (capped at ``PROBE_LIMIT``) per store for one subject, each by its own index."""
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT"
            " (SELECT count(*) FROM (SELECT 1 FROM sessions WHERE app_name = %(app)s AND user_id = %(user)s"
            "  LIMIT %(n)s) s),"
            " (SELECT count(*) FROM (SELECT 1 FROM user_states WHERE app_name = %(app)s AND user_id = %(user)s"
            "  LIMIT %(n)s) u),"
            " (SELECT count(*) FROM (SELECT 1 FROM memories WHERE subject_key = %(sk)s LIMIT %(n)s) m),"
            " (SELECT count(*) FROM (SELECT 1 FROM log_subject_index WHERE subject_key = %(sk)s LIMIT %(n)s) l),"
            " (SELECT count(*) FROM (SELECT 1 FROM data_keys WHERE subject_key = %(sk)s LIMIT %(n)s) k)",
            {"app": app_name, "user": user_id, "sk": subject, "n": PROBE_LIMIT},
        ).fetchone()
    assert row is not None
    listing = platform.s3.list_objects_v2(
        Bucket=platform.config.artifact_bucket, Prefix=user_prefix(app_name, subject), MaxKeys=1
    )
    return {
        "sessions": int(row[0]),
        "user_states": int(row[1]),
        "memory_rows": int(row[2]),
        "log_segments": int(row[3]),
        "data_keys": int(row[4]),
        "artifacts": int(listing.get("KeyCount", 0)),
    }


def ids_holding_data(platform: Platform, app_name: str, user_ids: Sequence[str]) -> list[str]:
    """Those of ``user_ids`` with ADK sessions, ``user:`` state or memory rows in the app (indexed probes)."""
    if not user_ids:
        return []
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT u FROM unnest(%s::text[]) AS given(u) WHERE"
            " EXISTS (SELECT 1 FROM sessions s WHERE s.app_name = %s AND s.user_id = given.u)"
            " OR EXISTS (SELECT 1 FROM user_states us WHERE us.app_name = %s AND us.user_id = given.u)"
            " OR EXISTS (SELECT 1 FROM memories m WHERE m.app_name = %s AND m.user_id = given.u)",
            (list(user_ids), app_name, app_name, app_name),
        ).fetchall()
    return [r[0] for r in rows]

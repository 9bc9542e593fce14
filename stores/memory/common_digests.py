"""Which token digests the memory table's statistics say many rows hold, read without touching a row.

A canary candidate is a word of the user's that nobody else's row holds, checked by a probe of the
``token_digests`` GIN index. A GIN index is read only by bitmap scans, which collect every matching row before
the first is looked at: probing a word that many rows hold costs as much as the platform holds of it (on the
100,000-user benchmark platform, 1.37 million memory rows, 50 candidates took 2.8 s, about 263,000 holders
each). Postgres's own statistics (``pg_stats.most_common_elems`` and their frequencies, kept by ANALYZE and
autovacuum) already say which digests are that common. Such a digest is held by others, so it is no canary:
it is left out without a probe. A table never analysed yields nothing, and every candidate is probed as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Connection

#: a digest the statistics put in at least this many rows is not probed (a canary is held by the user alone)
COMMON_HOLDERS = 10_000

_COMMON = (
    "SELECT e.d FROM pg_stats s CROSS JOIN LATERAL "
    "unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(d, f) "
    "WHERE s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'token_digests' "
    "AND NOT s.inherited AND e.d = ANY(%(among)s) "
    "AND e.f * (SELECT greatest(c.reltuples, 0) FROM pg_class c WHERE c.oid = 'memories'::regclass) >= %(holders)s"
)


def common_digests(conn: Connection[tuple[Any, ...]], among: Sequence[str], holders: int = COMMON_HOLDERS) -> set[str]:
    """Those of ``among`` the statistics estimate ``holders`` or more memory rows hold (one catalog read)."""
    rows = conn.execute(_COMMON, {"among": list(among), "holders": holders}).fetchall()
    return {str(r[0]) for r in rows}

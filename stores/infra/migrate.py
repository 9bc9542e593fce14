"""Versioned SQL migrations: files ``stores/infra/migrations/NNNN_name.sql``, applied in order, recorded.

Each file runs in its own transaction together with its row in ``schema_migrations``; an advisory lock
keeps two processes from applying the same migration at once, so re-running is always safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_ID = 0x45524153  # "ERAS"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"migration file {path.name} does not match NNNN_name.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError("two migration files share a version number")
    return found


def apply_migrations(url: str, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply pending migrations; returns the versions applied now (empty when up to date)."""
    applied_now: list[int] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for mig in discover(directory):
                if mig.version in done:
                    continue
                with conn.transaction():
                    conn.execute(mig.path.read_bytes())  # trusted file shipped with the package
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (mig.version, mig.name),
                    )
                applied_now.append(mig.version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied_now


def applied_versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]

"""google-adk's own session tables: created by google-adk, checked against the version we know.

The erase adapter writes SQL against ADK's schema directly, so it must refuse a schema it was not
written for. ``KNOWN_SCHEMA_VERSION`` is the ``adk_internal_metadata.schema_version`` of the JSON
event schema (google-adk >= 1.19); the legacy pickle schema (``0``) is refused with a clear error.
"""

from __future__ import annotations

import asyncio

import psycopg

from stores.infra.errors import UnknownSchema

KNOWN_SCHEMA_VERSION = "1"


def sqlalchemy_url(postgres_url: str) -> str:
    """The same database as a SQLAlchemy URL on the psycopg 3 driver, as google-adk needs it."""
    for prefix in ("postgresql://", "postgres://"):
        if postgres_url.startswith(prefix):
            return "postgresql+psycopg://" + postgres_url[len(prefix) :]
    return postgres_url


async def _prepare(postgres_url: str) -> None:
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(db_url=sqlalchemy_url(postgres_url))
    try:
        await service.prepare_tables()
    finally:
        await service.db_engine.dispose()


def schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> str | None:
    exists = conn.execute("SELECT to_regclass('adk_internal_metadata') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute("SELECT value FROM adk_internal_metadata WHERE key = 'schema_version'").fetchone()
    return None if row is None else str(row[0])


def check_schema(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    version = schema_version(conn)
    if version != KNOWN_SCHEMA_VERSION:
        raise UnknownSchema(
            f"google-adk session schema version {version!r} is not supported "
            f"(this release knows version {KNOWN_SCHEMA_VERSION!r}); migrate the sessions database first"
        )


def ensure_adk_schema(postgres_url: str) -> None:
    """Let google-adk create its tables (a no-op when present), then check their version.

    Where google-adk is not installed (the production worker image) the platform owns its tables:
    only the version check runs.
    """
    try:
        import google.adk.sessions  # noqa: F401
    except ImportError:
        pass
    else:
        asyncio.run(_prepare(postgres_url))
    with psycopg.connect(postgres_url) as conn:
        check_schema(conn)

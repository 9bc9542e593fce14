"""Prepare the platform's database: google-adk's session tables first (migration 0004 indexes them), then ours."""

from __future__ import annotations

from stores.infra.migrate import apply_migrations
from stores.sessions.schema import ensure_adk_schema


def prepare_database(url: str) -> list[int]:
    """Create google-adk's tables if missing, then apply pending migrations; returns the versions applied now."""
    ensure_adk_schema(url)
    return apply_migrations(url)

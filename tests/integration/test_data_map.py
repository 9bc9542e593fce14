"""The data map (issue 39): what the platform really writes, discovered from catalogs, must be claimed.

Discovery reads Postgres's catalog (every table with a column naming a user, subject or session), the
configured buckets' top-level prefixes, the cache's key prefixes (a bounded ``SCAN``) and the Chroma and
Qdrant collections; each place must be claimed by a registered adapter (``claims()``) or by the erasure's
own bookkeeping list, whose every table is justified. A table planted with a ``user_id`` column and claimed
by nobody fails ``erasure worker --check``'s ``data_map`` part, naming it.

Also here: the other-spellings presence probe comes from the adapters, so a store added as a package of its
own (the notes plug-in of ``test_adapter_plugin``) is probed with no edit outside its folder.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.adapters.interface import Claims, DataClaims
from stores.operations import data_map
from stores.platform import Platform
from tests.integration.test_adapter_plugin import install_distribution
from tests.plugins.notes_store import write_note
from workers.check import check_data_map
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.wiring import build_platform

pytestmark = [pytest.mark.integration]

APP = "data-map"
#: the built-in stores that hold user data: each must say what it claims
HOLDING_STORES = {"artifacts", "sessions", "memory", "logs", "keys", "response_cache", "chroma_memory", "qdrant_memory"}


@pytest.fixture
def planted_table(platform: Platform) -> Iterator[str]:
    with platform.pool.connection() as conn:
        conn.execute("CREATE TABLE planted_notes (user_id text, note text)")
    try:
        yield "planted_notes"
    finally:
        with platform.pool.connection() as conn:
            conn.execute("DROP TABLE IF EXISTS planted_notes")


def test_the_naming_rule() -> None:
    """A column names a person when one of its ``_``-separated words is user, subject, session or owner."""
    named = ["user_id", "subject_key", "session_id", "owner", "owner_key", "source_sessions", "user_id_sealed"]
    assert all(data_map.names_a_person(c) for c in named)
    unnamed = ["id", "app_name", "requested_by", "actor", "principal", "id_hash", "segment_key", "superuser"]
    assert not any(data_map.names_a_person(c) for c in unnamed)  # words, not substrings: superuser is none
    assert data_map.names_a_person("USER_ID")


@pytest.mark.asyncio(loop_scope="session")
async def test_the_real_stack_is_fully_claimed(platform: Platform, local_stack: Settings) -> None:
    await seed_platform(platform, APP, user_ids(2, 401, prefix="map"), "small", 3)
    claims = data_map.claims_of(platform.adapters.in_order(), platform.store_context.buckets)
    for adapter in platform.adapters.in_order():
        if adapter.name in HOLDING_STORES:
            assert isinstance(adapter, Claims), adapter.name
            assert adapter.claims() != DataClaims(), adapter.name
    found = data_map.discover(platform.store_context)
    result = data_map.judge(found, claims)
    assert result.unclaimed == (), result.unclaimed
    names = {(f.kind, f.name) for f in found.places}
    # what the seeded platform writes, each kind of place discovered (not vacuous)
    for table in ("sessions", "events", "user_states", "memories", "data_keys", "log_subject_index"):
        assert ("table", table) in names
    assert ("table", "app_states") not in names  # no column names a person
    buckets = platform.store_context.buckets
    assert ("prefix", f"{buckets.artifacts}/a/") in names
    assert ("prefix", f"{buckets.logs}/logs/") in names
    assert result.claimed_by[("keyspace", "rc:e:")] == result.claimed_by[("keyspace", "rc:i:")] == "response_cache"
    assert any(kind == "collection" and name.startswith("chroma/") for kind, name in names)
    assert result.claimed_by[("table", "sessions")] == "sessions"
    assert result.claimed_by[("table", "erasure_requests")] == "bookkeeping"
    ok = check_data_map(local_stack, load_secrets(local_stack))
    assert ok.ok, ok.detail


def test_an_unclaimed_table_fails_the_check_naming_it(
    platform: Platform, local_stack: Settings, planted_table: str
) -> None:
    failed = check_data_map(local_stack, load_secrets(local_stack))
    assert not failed.ok
    assert "table planted_notes" in failed.detail
    assert "user_id" in failed.detail  # the column that made it user data
    with platform.pool.connection() as conn:
        conn.execute("DROP TABLE planted_notes")
    again = check_data_map(local_stack, load_secrets(local_stack))
    assert again.ok, again.detail


def test_an_unclaimed_prefix_and_keyspace_fail_the_check(platform: Platform, local_stack: Settings) -> None:
    bucket = platform.store_context.buckets.artifacts
    key = f"exports/{uuid.uuid4().hex}.json"
    platform.s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
    import valkey

    assert local_stack.response_cache_url is not None
    cache = valkey.Valkey.from_url(local_stack.response_cache_url)
    cache.set("notes:one", b"x")
    try:
        failed = check_data_map(local_stack, load_secrets(local_stack))
        assert not failed.ok
        assert f"prefix {bucket}/exports/" in failed.detail
        assert "keyspace notes:" in failed.detail
    finally:
        cache.delete("notes:one")
        cache.close()  # type: ignore[no-untyped-call]
        versions = platform.s3.list_object_versions(Bucket=bucket, Prefix="exports/")
        for v in versions.get("Versions", []) + versions.get("DeleteMarkers", []):
            platform.s3.delete_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
    assert check_data_map(local_stack, load_secrets(local_stack)).ok


def test_bookkeeping_tables_are_justified_real_and_nobody_elses(platform: Platform) -> None:
    """Every bookkeeping table exists, names a person (else it needs no entry) and says why it is PII-free;
    no adapter claims one of them too (the list would then hide what an adapter forgot)."""
    found = data_map.discover(platform.store_context)
    tables = {f.name for f in found.places if f.kind == "table"}
    for table, why in data_map.BOOKKEEPING_TABLES.items():
        assert table in tables, table
        assert len(why) > 20, table
    claimed = {t for a in platform.adapters.in_order() if isinstance(a, Claims) for t in a.claims().tables}
    assert not claimed & set(data_map.BOOKKEEPING_TABLES)


def test_discovery_reads_catalogs_only(platform: Platform) -> None:
    """Discovery's SQL touches only catalogs: the statements it runs name pg_catalog, never a platform table."""
    seen: list[str] = []
    real = platform.store_context

    class Recording:
        def __init__(self, conn: object) -> None:
            self._conn = conn

        def execute(self, query: str, *args: object, **kwargs: object) -> object:
            seen.append(query)
            return self._conn.execute(query, *args, **kwargs)  # type: ignore[attr-defined]

    with real.pool.connection() as conn:
        data_map.tables_naming_people(Recording(conn))  # type: ignore[arg-type]
    assert seen
    assert all("pg_catalog" in q and " memories" not in q and " sessions" not in q for q in seen)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_store_added_as_a_package_is_probed_for_other_spellings(
    local_stack: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes store (``tests/plugins/notes_store.py``, registered by entry point only) holds data of another
    spelling of the id (NFD of an NFC id): the other-spellings warning names it. Old code: fixed SQL over
    three tables, so it found nothing."""
    from workers.service import other_spellings_with_data

    site = tmp_path / "site-packages"
    install_distribution(site, "notes-store", "[erasure.adapters]\nnotes = tests.plugins.notes_store:NotesAdapter\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("NOTES_STORE_DIR", str(tmp_path / "notes"))
    platform = build_platform(local_stack, key_cache_ttl=0.0)
    try:
        assert "notes" in platform.adapters.names
        given = unicodedata.normalize("NFC", f"zoë-{uuid.uuid4().hex[:6]}")
        other = unicodedata.normalize("NFD", given)
        assert other != given
        assert other_spellings_with_data(platform, "plugin-notes", given) == []
        write_note(platform, "plugin-notes", other, "a note under the other spelling")
        assert other_spellings_with_data(platform, "plugin-notes", given) == [other]
        # the spelling itself is never its own "other spelling"
        assert other_spellings_with_data(platform, "plugin-notes", other) == []
    finally:
        platform.close()

"""Issue 39, item 5: the physical attestation's words against a raw scan of the database's files.

The attestation was signed (``run_after_last_deletion: true``, every table vacuumed) while an erased user's
canaries were still readable in the heap files and the WAL: plain VACUUM marks the space free, it overwrites
nothing. Now each store states what its pass did and which copies remain where (``statements``,
``stores.physical.statements``); these tests check the words against what a scan finds.

1. **Unsealed**: a session written through google-adk's plain service (content and raw id in clear, one
   value large enough to go to TOAST, stored uncompressed; a control's rows after it, on the same pages, and
   found there after the job: the scan works), erased through the saga, the physical job run
   (vacuum, compaction, the keys table rewritten and the WAL switched: ``tests/physical_job.py``), then every
   file of the data directory scanned (heap, TOAST, index and WAL files: ``tests/raw_scan.py``). Every place
   the canaries are found (a relation file's kind and table, or ``pg_wal``) must be named in the vacuum
   store's statement, which must not say the bytes were overwritten and must say unsealed rows are in clear.
2. **Sealed** (the default): the same through the sealed services, the needles being the bytes the rows
   became (sealed event data, sealed memory content, the user's wrapped data key), read before the erasure.
   Where the scan finds them must be named by the vacuum store's statement (events, memories, WAL) or the
   keys statement (data_keys, WAL), the vacuum statement must say the content is sealed under the shredded
   key and give the key-epoch bound the attestation carries.

Both: the signed attestation (signature verified by the run) holds no canary, raw id or sealed byte; the
CLI's ``erasure receipt show --physical`` prints it with the statements and ``receipt verify`` accepts it.
``-s`` prints where the scan found each needle.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from psycopg import sql
from temporalio.testing import WorkflowEnvironment

from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adk_events import user_event
from tests.integration.test_cli import cli
from tests.raw_scan import Hit, Matcher, Pattern, Scan, scan, text_patterns
from tests.saga_harness import SagaHarness
from verifier.receipts.attestation import attestation_bytes, load_attestation
from workers.settings import Settings
from workers.stack.parts import PostgresPart

pytestmark = pytest.mark.integration

APP = "physical-claims"
MARKER = "zqclaim"
SAMPLE = 48  # bytes of a sealed value taken as its needle: its tail (random, the GCM tag included)
#: a relation file's kind (pg_class.relkind, TOAST tables apart) -> the place a statement names
PLACE_OF_KIND = {"r": "heap_pages", "t": "toast_pages", "i": "index_pages"}
VACUUMED = {"events", "sessions", "user_states", "memories"}


def canary() -> str:
    return MARKER + secrets.token_hex(10)


def data_dir(settings: Settings) -> Path:
    return PostgresPart(settings).data_dir


def checkpoint(platform: Platform) -> None:
    with platform.pool.connection() as conn:
        conn.execute("CHECKPOINT")


def relations(platform: Platform) -> dict[str, tuple[str, str]]:
    """Each relation file (relative to the data directory) -> (its table, the place a statement names): a
    TOAST table or index is named by the table it belongs to."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT pg_relation_filepath(c.oid), c.relkind, "
            "COALESCE(t.relname, ti.relname, it.relname, c.relname) FROM pg_class c "
            "LEFT JOIN pg_class t ON t.reltoastrelid = c.oid "  # c is a TOAST table: t its table
            "LEFT JOIN pg_index i ON i.indexrelid = c.oid "
            "LEFT JOIN pg_class ti ON ti.reltoastrelid = i.indrelid "  # c is a TOAST table's index
            "LEFT JOIN pg_class it ON it.oid = i.indrelid AND ti.oid IS NULL "  # c is a table's index
            "WHERE pg_relation_filepath(c.oid) IS NOT NULL"
        ).fetchall()
    return {str(path): (str(table), PLACE_OF_KIND.get(str(kind), f"relkind {kind}")) for path, kind, table in rows}


def place_of(hit: Hit, files: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    """(table or ``-``, place) of a hit's file: ``pg_wal`` segments are ``wal``; relation files by their
    kind (fork and segment suffixes ignored); anything else by its path (no statement names it)."""
    if hit.root == "wal":
        return "-", "wal"
    path = f"base/{hit.path}"
    found = files.get(re.sub(r"(_fsm|_vm|_init)?(\.\d+)?$", "", path))
    return found if found is not None else ("-", f"file {path}")


def places(hits: Iterable[Hit], files: Mapping[str, tuple[str, str]]) -> dict[tuple[str, str], set[str]]:
    """(table, place) -> the needles found there."""
    out: dict[tuple[str, str], set[str]] = {}
    for h in hits:
        out.setdefault(place_of(h, files), set()).add(h.needle)
    return out


def scan_database(settings: Settings, platform: Platform, patterns: list[Pattern]) -> Scan:
    checkpoint(platform)
    root = data_dir(settings)
    return scan({"base": [root / "base"], "wal": [root / "pg_wal"]}, patterns)


def external_storage(platform: Platform) -> None:
    """``STORAGE EXTERNAL`` for the ADK columns that hold content: a large value goes out of line as it is,
    never compressed (a compressed canary is invisible to a byte scan)."""
    with platform.pool.connection() as conn:
        for table, column in (("events", "event_data"), ("sessions", "state"), ("user_states", "state")):
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE EXTERNAL").format(
                    sql.Identifier(table), sql.Identifier(column)
                )
            )


def statements_of(attestation: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    said = attestation.get("statements")
    assert isinstance(said, list), f"the attestation states nothing per store: {sorted(attestation)}"
    assert said, "the attestation's statements are empty"
    return {s["store"]: s for s in said}


def named(statement: Mapping[str, Any]) -> set[str]:
    return {c["where"] for c in statement["remains"]}


def no_overwrite_claim(statement: Mapping[str, Any]) -> None:
    assert statement["bytes_overwritten"] is False, statement
    claims = f"{statement['done']} {statement['content']}"
    for m in re.finditer(r"overwritten|physically removed|wiped", claims):
        assert "not " in claims[max(0, m.start() - 12) : m.start()], f"claims {m.group()}: {statement['done']}"


def attestation_is_pii_free(platform: Platform, request_id: str, patterns: list[Pattern]) -> None:
    document = load_attestation(platform.pool, request_id)
    assert document is not None
    found = Matcher(patterns).count(attestation_bytes(document))
    assert not found, f"the signed attestation holds the user's data: {sorted(found)}"


def show(found: Mapping[tuple[str, str], set[str]]) -> str:
    return "\n".join(f"  {table} {place}: {sorted(needles)}" for (table, place), needles in sorted(found.items()))


# ----- 1. unsealed: google-adk's plain service ------------------------------------------------------------


async def seed_plain(platform: Platform, user: str, words: Mapping[str, str]) -> None:
    service = platform.plain_adk_session_service()
    try:
        session = await service.create_session(app_name=APP, user_id=user, state={"note": f"remember {words['state']}"})
        await service.append_event(session, user_event(f"my neighbour is called {words['event']}", inv="plain-1"))
        large = " ".join(f"{words['large']} said the parcel should wait at the neighbours" for _ in range(200))
        await service.append_event(session, user_event(large, inv="plain-2"))
    finally:
        await service.db_engine.dispose()


@pytest.mark.asyncio(loop_scope="session")
async def test_an_unsealed_canary_the_attestation_names_every_place_the_scan_finds_it(
    saga: SagaHarness, local_stack: Settings, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    platform = saga.platform
    user = f"{MARKER}-plain-{secrets.token_hex(6)}@example.org"
    words = {"state": canary(), "event": canary(), "large": canary()}
    needles = {f"plain/{k}": v for k, v in words.items()} | {"plain/raw_id": user}
    patterns = text_patterns(needles)
    await asyncio.to_thread(external_storage, platform)
    await seed_plain(platform, user, words)
    # a control's rows after them, on the same pages: a vacuum does not truncate those pages away
    control = f"{MARKER}-control-{secrets.token_hex(6)}@example.org"
    kept = {"state": canary(), "event": canary(), "large": canary()}
    await seed_plain(platform, control, kept)
    files = await asyncio.to_thread(relations, platform)

    before = places((await asyncio.to_thread(scan_database, local_stack, platform, patterns)).hits, files)
    # the scan can see each kind of place: the rows in the heap, the large value in TOAST, the raw id in an
    # index, all of it in the WAL
    for place, needle in (("heap_pages", "plain/event"), ("toast_pages", "plain/large"), ("wal", "plain/state")):
        assert any(p == place and needle in n for (_, p), n in before.items()), f"{needle} not in {place}:\n" + show(
            before
        )
    assert any(p == "index_pages" and "plain/raw_id" in n for (_, p), n in before.items()), show(before)

    result = await saga.erase(APP, user)
    assert result.status == "completed", result
    run = await saga.physical([result.request_id])
    assert (run.attested, run.not_covered) == (1, 0), run.not_covered_in(result.request_id)
    assert run.keys_table == {"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}
    attested = run.attestation(result.request_id)  # its signature verified
    assert attested["run_after_last_deletion"] is True

    controls = text_patterns({"control/event": kept["event"], "control/large": kept["large"]})
    scanned = await asyncio.to_thread(scan_database, local_stack, platform, [*patterns, *controls])
    after = places(scanned.select(list(needles)), files)
    print(f"\nthe unsealed canaries after the job:\n{show(after)}")
    kept_at = places(scanned.select(["control/event", "control/large"]), files)
    assert {("events", "heap_pages"), ("events", "toast_pages")} <= set(kept_at), show(kept_at)  # the scan works
    said = statements_of(attested)
    vacuum = said["vacuum"]
    no_overwrite_claim(vacuum)
    assert "in clear" in vacuum["content"], vacuum["content"]  # what a plain writer left is not "sealed"
    unnamed = {
        (table, place): n
        for (table, place), n in after.items()
        if not (place in named(vacuum) and (table in VACUUMED or place == "wal"))
    }
    assert not unnamed, "the scan finds the erased canaries where the attestation names no copy:\n" + show(unnamed)
    attestation_is_pii_free(platform, result.request_id, patterns)
    await the_cli_shows_the_statements(saga, temporal_env, result.request_id, attested, tmp_path)


async def the_cli_shows_the_statements(
    saga: SagaHarness, env: WorkflowEnvironment, request_id: str, attested: Mapping[str, Any], tmp: Path
) -> None:
    """``erasure receipt show --physical`` prints the signed document with the statements, and ``erasure
    receipt verify`` checks its signature."""
    code, out, err = await cli(saga, env, "receipt", "show", request_id, "--physical")
    assert code == 0, err
    assert json.loads(out)["receipt"]["statements"] == attested["statements"]
    document = tmp / "attestation.json"
    document.write_text(out)
    code, out, _ = await cli(saga, env, "receipt", "verify", str(document))
    assert code == 0, out


# ----- 2. sealed: the default services --------------------------------------------------------------------


async def seed_sealed(platform: Platform, user: str, words: Mapping[str, str]) -> None:
    service = platform.adk_session_service()
    try:
        session = await service.create_session(app_name=APP, user_id=user, state={"note": f"remember {words['state']}"})
        await service.append_event(session, user_event(f"my neighbour is called {words['event']}", inv="sealed-1"))
    finally:
        await service.db_engine.dispose()
    await platform.memory_service.add_memory(
        app_name=APP,
        user_id=user,
        memories=[
            MemoryEntry(
                content=types.Content(role="user", parts=[types.Part(text=f"a spare key under {words['memory']}")]),
                author="extractor",
                custom_metadata={"kind": "fact"},
            )
        ],
        custom_metadata={"purpose": "personalisation", "retention": "preference"},
    )


def sealed_bytes(platform: Platform, sk: str) -> dict[str, list[bytes]]:
    """The bytes the user's data became, as the tables hold them: the tails of the sealed event data and
    memory contents, and the user's wrapped data keys."""
    with platform.pool.connection() as conn:
        events = conn.execute(
            "SELECT convert_to(event_data::text, 'UTF8') FROM events WHERE app_name = %s AND user_id = %s", (APP, sk)
        ).fetchall()
        memories = conn.execute(
            "SELECT content_sealed FROM memories WHERE app_name = %s AND subject_key = %s", (APP, sk)
        ).fetchall()
        keys = conn.execute("SELECT wrapped_key FROM data_keys WHERE subject_key = %s", (sk,)).fetchall()
    out = {
        "sealed/event": [_sealed_tail(bytes(r[0])) for r in events],
        "sealed/memory": [bytes(r[0])[-SAMPLE:] for r in memories],
        "sealed/wrapped_key": [bytes(r[0]) for r in keys],
    }
    assert all(out.values()), {k: len(v) for k, v in out.items()}
    return out


def _sealed_tail(event_data: bytes) -> bytes:
    """The longest base64 run in an event's sealed JSON, its last ``SAMPLE`` bytes (the ciphertext's tail)."""
    runs = re.findall(rb"[A-Za-z0-9+/_-]{64,}", event_data)
    assert runs, "no sealed value in the event"
    tail: bytes = max(runs, key=len)[-SAMPLE:]
    return tail


@pytest.mark.asyncio(loop_scope="session")
async def test_sealed_copies_the_attestation_names_where_they_remain_and_the_keys_bound(
    saga: SagaHarness, local_stack: Settings
) -> None:
    platform = saga.platform
    user = f"{MARKER}-sealed-{secrets.token_hex(6)}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    words = {"state": canary(), "event": canary(), "memory": canary()}
    await seed_sealed(platform, user, words)
    stored = await asyncio.to_thread(sealed_bytes, platform, sk)
    patterns = [Pattern(label, "bytes", data) for label, blobs in stored.items() for data in blobs]
    clear = text_patterns({f"clear/{k}": v for k, v in words.items()} | {"clear/raw_id": user})
    files = await asyncio.to_thread(relations, platform)
    before = places((await asyncio.to_thread(scan_database, local_stack, platform, patterns)).hits, files)
    for needle in stored:  # the scan sees each sealed value where it was written
        assert any(needle in n for n in before.values()), f"{needle} not found before the erasure:\n" + show(before)

    result = await saga.erase(APP, user)
    assert result.status == "completed", result
    run = await saga.physical([result.request_id])
    assert (run.attested, run.not_covered) == (1, 0), run.not_covered_in(result.request_id)
    attested = run.attestation(result.request_id)
    assert attested["keys_table"] == {"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}

    found = await asyncio.to_thread(scan_database, local_stack, platform, [*patterns, *clear])
    after = places(found.select(list(stored)), files)
    print(f"\nthe sealed values after the job:\n{show(after)}")
    assert not found.select([p.needle for p in clear]), "content or raw id in clear in the database files"
    said = statements_of(attested)
    vacuum, keys = said["vacuum"], said["keys"]
    for statement in (vacuum, keys):
        no_overwrite_claim(statement)
    assert "sealed under the user's data key, which the erasure shredded" in vacuum["content"]
    assert vacuum["readable_until"] == attested["key_unwrappable_by"] is not None
    assert attested["key_unwrappable_by"] in keys["content"]
    unnamed: dict[tuple[str, str], set[str]] = {}
    for (table, place), needles in after.items():
        for needle in needles:
            owner = keys if needle == "sealed/wrapped_key" else vacuum
            in_table = place == "wal" or table in ({"data_keys"} if owner is keys else VACUUMED)
            if not (in_table and place in named(owner)):
                unnamed.setdefault((table, place), set()).add(needle)
    assert not unnamed, "the scan finds the erased user's sealed bytes where the attestation names no copy:\n" + show(
        unnamed
    )
    attestation_is_pii_free(platform, result.request_id, [*patterns, *clear])

"""The data map: every place the platform really writes user data must be claimed (issue 39).

DELF (Facebook's deletion framework) refuses a data type without a deletion policy; this is the same rule
for a running platform. ``discover`` reads what is there, from catalogs only (never a table's rows, never
whole listings): ``judge`` fails every place that holds user data and that no registered adapter claims
(``Claims.claims()``, ``stores.adapters.interface``) and the erasure's own bookkeeping does not justify.

What is discovered, and the rule for "holds user data":

``table``       every Postgres table (also partitioned, materialised and foreign tables; not views, not
                partitions: their parent is named) outside the system schemas with a column that *names a
                person*: one of the column name's ``_``-separated words (case-insensitive) is ``user``,
                ``subject``, ``session`` or ``owner`` (or their plurals): ``user_id``, ``subject_key``,
                ``session_id``, ``owner``, ``source_sessions``, ``user_id_sealed``; not ``superuser`` nor
                ``requested_by`` (staff). Read from ``pg_catalog``. Tables in a schema of the connection's
                search path are named bare, others ``schema.table``.
``prefix``      each top-level prefix (``<bucket>/<prefix>/``) of every bucket the platform configures
                (artifacts, logs, receipts), from a delimited listing (``Delimiter='/'``, at most
                ``MAX_PAGES`` pages), each confirmed by one version listing of a single key (an emptied prefix
                holds nothing); objects at a bucket's top level are one place, ``<bucket>/``.
``keyspace``    each key prefix of the response cache (``cache_url``): a bounded ``SCAN`` (at most
                ``MAX_KEYS`` keys); a key is covered when it starts with a claimed keyspace, and an uncovered
                one is reported by its first ``:``-separated word (``notes:``), never whole.
``collection``  each collection of the Qdrant store (``qdrant_path``: local mode's ``meta.json``) and of the
                Chroma backend's subject databases (``chroma_path``: each database's ``collections`` table,
                read-only, at most ``MAX_DATABASES`` of them), as ``<engine>/<name>``.

A name that is not a short plain word (``SAFE_NAME``) is shown by a digest, so a prefix or keyspace named
after a user never reaches the check's output. Cost follows the platform's schema and layout, not its data.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.adapters.context import Buckets, StoreContext
from stores.adapters.interface import Claims, DataClaims, EraseAdapter

if TYPE_CHECKING:
    from psycopg import Connection

#: the words of a column name that make it name a person (see the module)
NAMING_WORDS = frozenset({"user", "users", "subject", "subjects", "session", "sessions", "owner", "owners"})
#: bounds of discovery: listing pages per bucket, cache keys scanned, Chroma databases opened
MAX_PAGES = 10
MAX_KEYS = 10_000
MAX_DATABASES = 32
SAFE_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
#: who claims what the erasure keeps for itself
BOOKKEEPING = "bookkeeping"

#: The erasure's own books and ledgers that name a subject, each PII-free by design (and why). Nothing here is
#: user content: pseudonymous subject keys, random ids, keyed digests, and identifiers sealed under the
#: service key that the request drops when it completes. A table added here needs its reason.
BOOKKEEPING_TABLES: Mapping[str, str] = {
    "erasure_requests": "the request books: subject key, state and dates; the raw id and contact are sealed "
    "under the service key and dropped when the request completes (user_id_sealed, contact_sealed)",
    "erasure_ledger": "what was erased and when, by subject key: the proof the sweeps and re-checks read",
    "legal_holds": "holds by subject key with staff's reason; placed by staff, about the subject, not theirs",
    "hold_events": "the history of holds: subject key, placed/released, staff reason and actor",
    "user_tombstones": "the fence: subject key and request id only",
    "session_tombstones": "erased sessions by keyed digest, the session reference sealed under the service key "
    "(never content): re-ingestion is refused by them for ever",
    "erased_memories": "ids of erased memory rows (random UUIDs) by subject key: provenance that must stay "
    "followable after the rows are gone",
    "receipts": "signed receipts: subject key, counts and check results; the receipt schema admits no content",
    "request_approvals": "approval decisions: subject key, path, staff and signature",
    "forget_requests": "item-forget requests: subject key, memory ids, outcome counts; the payload is sealed "
    "under the service key and dropped when the forget completes (payload_sealed)",
    "forget_tombstones": "forget tombstones: subject key, memory ids and keyed span digests, never the text",
}
#: the receipts bucket's top-level prefixes (the erasure's own, PII-free by design), and why
BOOKKEEPING_PREFIXES: Mapping[str, str] = {
    "receipts/": "signed receipts and physical attestations (request ids, counts, digests)",
    "tombstones/": "the tombstone journal replayed after a restore: subject keys, request ids, keyed digests",
    "lifecycle/": "the lifecycle journal: memory ids and events, no content",
    "audit/": "anchors of the audit log's head (sequence numbers and digests)",
}


def names_a_person(column: str) -> bool:
    """Whether a column's name names a user, subject, session or owner (a whole ``_``-separated word)."""
    return not NAMING_WORDS.isdisjoint(column.lower().split("_"))


def shown(name: str) -> str:
    """The name itself when it is a short plain word, else a digest (a name may be someone's id)."""
    return name if SAFE_NAME.fullmatch(name) else "#" + hashlib.sha256(name.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Place:
    """One place that holds user data: ``kind`` (table, prefix, keyspace, collection), its ``name``, and why
    it counts (the columns naming a person, the keys seen)."""

    kind: str
    name: str
    why: str = ""


@dataclass(frozen=True)
class Discovered:
    places: tuple[Place, ...]
    #: what a bound cut short (PII-free): the map is then a sample of that part
    sampled: tuple[str, ...] = ()
    #: keys scanned by claimable prefix: judged against keyspace claims key by key
    cache_keys: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Judged:
    unclaimed: tuple[Place, ...]
    claimed_by: dict[tuple[str, str], str]
    sampled: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.unclaimed

    def detail(self) -> str:
        if self.unclaimed:
            listed = "; ".join(
                f"{p.kind} {p.name} ({p.why})" if p.why else f"{p.kind} {p.name}" for p in self.unclaimed
            )
            return f"user data no adapter claims: {listed}"
        kinds = sorted({kind for kind, _name in self.claimed_by})
        counted = ", ".join(f"{sum(1 for k, _ in self.claimed_by if k == kind)} {kind}s" for kind in kinds)
        note = f" (sampled: {', '.join(self.sampled)})" if self.sampled else ""
        return f"every place holding user data is claimed: {counted or 'nothing found'}{note}"


def tables_naming_people(conn: Connection[Any]) -> list[Place]:
    """Tables with a column naming a person, from ``pg_catalog`` only (see the module)."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname, a.attname, n.nspname = ANY(current_schemas(false))"
        " FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " WHERE c.relkind IN ('r', 'p', 'm', 'f') AND NOT c.relispartition"
        " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        " AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp%%'"
        " ORDER BY 1, 2, a.attnum"
    ).fetchall()
    columns: dict[str, list[str]] = {}
    for schema, table, column, on_path in rows:
        if names_a_person(column):
            columns.setdefault(table if on_path else f"{schema}.{table}", []).append(column)
    return [Place("table", name, ", ".join(cols)) for name, cols in sorted(columns.items())]


def bucket_prefixes(s3: Any, buckets: Iterable[str]) -> tuple[list[Place], list[str]]:
    """Every top-level prefix of each bucket (a delimited listing, ``MAX_PAGES`` pages at most)."""
    places: list[Place] = []
    sampled: list[str] = []
    for bucket in dict.fromkeys(buckets):
        tops: set[str] = set()
        loose = 0
        token: str | None = None
        for _page in range(MAX_PAGES):
            args: dict[str, Any] = {"Bucket": bucket, "Delimiter": "/"}
            if token:
                args["ContinuationToken"] = token
            listing = s3.list_objects_v2(**args)
            tops |= {p["Prefix"] for p in listing.get("CommonPrefixes", [])}
            loose += len(listing.get("Contents", []))
            token = listing.get("NextContinuationToken") if listing.get("IsTruncated") else None
            if not token:
                break
        else:
            sampled.append(f"{bucket}: first {MAX_PAGES} listing pages")
        held = [top for top in sorted(tops) if _holds_anything(s3, bucket, top)]
        places += [Place("prefix", f"{bucket}/{shown(top.rstrip('/'))}/") for top in held]
        if loose:
            places.append(Place("prefix", f"{bucket}/", f"{loose} objects at the top level"))
    return places, sampled


def _holds_anything(s3: Any, bucket: str, prefix: str) -> bool:
    """Whether any object version or delete marker is under ``prefix`` (one key listed): a store may list a
    prefix whose objects are all gone (SeaweedFS keeps empty folders), and old versions hold data too."""
    listing = s3.list_object_versions(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    return bool(listing.get("Versions") or listing.get("DeleteMarkers"))


def cache_keys(url: str) -> tuple[list[str], list[str]]:
    """The cache's keys, by a bounded ``SCAN`` (``MAX_KEYS`` at most); what is left unscanned is noted."""
    import valkey

    client: Any = valkey.Valkey.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)  # sync client
    try:
        keys: list[str] = []
        cursor = 0
        while True:
            cursor, batch = client.scan(cursor=cursor, count=1000)
            keys += [k.decode(errors="replace") if isinstance(k, bytes) else str(k) for k in batch]
            if cursor == 0:
                return keys, []
            if len(keys) >= MAX_KEYS:
                return keys, [f"cache: first {len(keys)} keys"]
    finally:
        client.close()


def keyspace_of(key: str) -> str:
    """How an unclaimed key is reported: its first ``:``-separated word, never the whole key."""
    head, colon, _rest = key.partition(":")
    return f"{shown(head)}:" if colon else "(keys without a prefix)"


def qdrant_collections(path: str) -> list[Place]:
    """Local mode's catalog (``meta.json``): the collections' names; nothing of the points is read."""
    meta = Path(path) / "meta.json"
    if not meta.is_file():
        return []
    names = json.loads(meta.read_text()).get("collections", {})
    return [Place("collection", f"qdrant/{shown(name)}") for name in sorted(names)]


def chroma_collections(path: str) -> tuple[list[Place], list[str]]:
    """The collections of the subject databases under the Chroma root (``<root>/<2 hex>/<db>/``), each
    ``chroma.sqlite3`` opened read-only for its ``collections`` table; ``MAX_DATABASES`` at most."""
    root = Path(path)
    if not root.is_dir():
        return [], []
    names: dict[str, int] = {}
    opened = 0
    for shard in sorted(root.iterdir()):
        for database in sorted(shard.iterdir()) if shard.is_dir() else []:
            catalog = database / "chroma.sqlite3"
            if not catalog.is_file():
                continue
            if opened >= MAX_DATABASES:
                return _collections(names), [f"chroma: first {MAX_DATABASES} databases"]
            opened += 1
            with sqlite3.connect(f"file:{catalog}?mode=ro", uri=True) as conn:
                for (name,) in conn.execute("SELECT name FROM collections"):
                    names[str(name)] = names.get(str(name), 0) + 1
    return _collections(names), []


def _collections(names: Mapping[str, int]) -> list[Place]:
    return [Place("collection", f"chroma/{shown(n)}", f"in {k} databases") for n, k in sorted(names.items())]


def discover(context: StoreContext) -> Discovered:
    """What the platform of ``context`` holds, place by place (see the module)."""
    with context.pool.connection() as conn:
        places = tables_naming_people(conn)
    b = context.buckets
    prefixes, sampled = bucket_prefixes(context.s3, (b.artifacts, b.logs, b.receipts))
    places += prefixes
    keys: list[str] = []
    url = context.option("cache_url")
    if url is not None and url.lower() != "none":
        keys, cut = cache_keys(url)
        sampled += cut
    qdrant = context.option("qdrant_path")
    if qdrant is not None and qdrant.lower() != "none":
        places += qdrant_collections(qdrant)
    chroma = context.option("chroma_path")
    if chroma is not None and chroma.lower() != "none":
        found, cut = chroma_collections(chroma)
        places += found
        sampled += cut
    return Discovered(tuple(places), tuple(sampled), tuple(keys))


def bookkeeping_claims(buckets: Buckets) -> DataClaims:
    """What the erasure keeps for itself (``BOOKKEEPING_TABLES``, ``BOOKKEEPING_PREFIXES``), as a claim."""
    return DataClaims(
        tables=tuple(BOOKKEEPING_TABLES),
        prefixes=tuple(f"{buckets.receipts}/{p}" for p in BOOKKEEPING_PREFIXES),
    )


def claims_of(adapters: Iterable[EraseAdapter], buckets: Buckets) -> dict[str, DataClaims]:
    """Each adapter's claims (those with the capability), and the bookkeeping's."""
    claims = {a.name: a.claims() for a in adapters if isinstance(a, Claims)}
    return {**claims, BOOKKEEPING: bookkeeping_claims(buckets)}


def judge(found: Discovered, claims: Mapping[str, DataClaims]) -> Judged:
    """Every discovered place with the claimant that covers it; those nobody covers are ``unclaimed``."""
    claimed_by: dict[tuple[str, str], str] = {}
    unclaimed: list[Place] = []

    def claimant(place: Place) -> str | None:
        for name, c in claims.items():
            if place.kind == "table" and place.name in c.tables:
                return name
            if place.kind == "prefix" and any(place.name.startswith(p) for p in c.prefixes):
                return name
            if place.kind == "collection" and place.name in c.collections:
                return name
        return None

    for place in found.places:
        who = claimant(place)
        if who is None:
            unclaimed.append(place)
        else:
            claimed_by[(place.kind, place.name)] = who
    stray: dict[str, int] = {}
    for key in found.cache_keys:
        who = next((n for n, c in claims.items() for k in c.keyspaces if key.startswith(k)), None)
        if who is None:
            stray[keyspace_of(key)] = stray.get(keyspace_of(key), 0) + 1
        else:
            space = next(k for k in claims[who].keyspaces if key.startswith(k))
            claimed_by[("keyspace", space)] = who
    unclaimed += [Place("keyspace", space, f"{n} keys") for space, n in sorted(stray.items())]
    return Judged(tuple(unclaimed), claimed_by, found.sampled)


def check(context: StoreContext, adapters: Iterable[EraseAdapter]) -> Judged:
    """The data map of the platform judged against the adapters' and the bookkeeping's claims."""
    return judge(discover(context), claims_of(adapters, context.buckets))

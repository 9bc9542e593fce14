"""The erase-adapter interface: one implementation per store, found through the registry.

An adapter is what the saga, the verifier and the sweeps know of a store. It declares its ``name`` (also
its step name, its check name and its key in the receipt) and the adapters it must run ``after`` (``"*"``:
after every adapter that does not itself say ``"*"``, as the key shredder does), and provides:

``locate``       how much the subject holds there (counts, each probe bounded), by subject key and
                 recorded references only;
``erase``        batched and idempotent; resumes from the cursor a previous attempt last reported
                 through ``beat`` (the activity's heartbeat details);
``remaining``    the verifier's read of what is left, written apart from ``erase`` (its own queries: no
                 helper shared with the eraser, so one bug cannot hide itself) and failing closed: input
                 the request never recorded is reported as ``missing``, which fails the check; ``bound``
                 (a completed request) limits it to data dated before the erasure; ``beat`` heartbeats;
``sweep_before`` what the late-writer sweeps remove: the subject's data dated before ``before`` (the
                 erasure time); the in-saga second sweep passes ``None``: everything of the subject;
``fingerprint``  test support: a digest per kind of object of one user, to show other users stay
                 byte-identical.

One optional capability, ``ItemForgetting``: ``forget_items(scope, beat)`` forgets, in the adapter's store,
what one item forget or one session erasure covers (``ForgetScope``: the forgotten ids, the erased session,
the tombstone's matcher) and returns counts; ``items_left(scope)`` counts what is still there (the forget
verification's check). The forget activity calls them on every registered adapter that has them, built-in
stores included, after its one first step (the memory store's forgetting, which places the tombstone and
so defines what the others are asked), and lists each store's counts in the forget's receipt; a registered
store that holds the subject's data (``locate``) and lacks the capability fails the forget closed: never a
receipt that says ``completed`` next to a store nobody asked. Beside it, ``ScopedItemForgetting``:
``items_check(scope)`` names the store's check (``ItemsCheck``), or says the scope leaves nothing there to
check (a store that acts only on a session erasure, asked about an item forget).

``VacuumTables``: ``vacuum_tables()`` names the Postgres tables the adapter deletes rows from, for the
physical clean-up's vacuum (a ``Claims`` adapter without it has its claimed tables vacuumed); ``SeesPeers``:
``see_peers(adapters)``, called by the registry with every registered adapter (the vacuum reads their tables).

Another optional capability, ``Claims``: ``claims()`` names the tables, bucket prefixes, cache keyspaces and
collections the adapter's erase and check cover (``DataClaims``); the data map check
(``stores.operations.data_map``, in ``erasure worker --check``) fails on any place holding user data that no
adapter (nor the erasure's justified bookkeeping) claims.

A factory (the entry point's value, called with a ``StoreContext``: ``stores.adapters.context``) raises
``AdapterNotConfigured`` when the platform has no such store: it is then left out of every plan. Everything
an adapter returns is PII-free: counts, and digests that cannot be reversed. The raw user id
is in ``Subject.user_id`` only while the request still holds it (``None`` afterwards: subject-key mode).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

# defined beside the context (its ``required`` raises it); named here, where factories have always found it
from stores.adapters.context import AdapterNotConfigured as AdapterNotConfigured
from stores.adapters.context import StoreContext

if TYPE_CHECKING:
    import random

    from stores.books.request_record import RequestRecord

#: ``after`` entry meaning: after every adapter that does not itself declare it.
AFTER_EVERY_OTHER = "*"
#: the entry-point group a package registers its adapters in (value: a factory ``(StoreContext) -> adapter``)
ENTRY_POINT_GROUP = "erasure.adapters"


@dataclass(frozen=True)
class Subject:
    """Whose data, for one call: the request, the pseudonymous subject key, the app, the raw id if known."""

    request_id: str
    subject_key: str
    app_name: str
    user_id: str | None = None  # None once the request forgot it (re-verification, scheduled sweeps)

    def raw_user_id(self) -> str:
        """The raw id, for a call that needs it (the activities' ``subject`` checks it against the key)."""
        if self.user_id is None:
            raise ValueError("the request's user id was already forgotten")
        return self.user_id


@dataclass(frozen=True)
class Bound:
    """The erasure time of a completed request: only data dated before it can be a leftover."""

    erased_at: datetime
    keys_shredded_at: datetime | None = None

    @property
    def s3_cutoff(self) -> datetime:
        """S3's ``LastModified`` has one-second resolution: only objects clearly older than the erasure."""
        return self.erased_at.replace(microsecond=0) - timedelta(seconds=1)

    @property
    def keys_cutoff(self) -> datetime:
        return self.keys_shredded_at or self.erased_at


@dataclass(frozen=True)
class Disposition:
    """What an erasure does to the user's data in one store, for the receipt (PII-free, the same for every
    request): ``what`` is ``deleted``, ``physically_removed`` or ``unreadable`` (key shredded); ``remains``
    says what is left where. An adapter without one is listed as ``deleted`` with nothing said."""

    what: str
    remains: str = ""


@dataclass(frozen=True)
class Remaining:
    """What the verifier found left in one store.

    Any non-zero ``counts`` value, or any ``missing`` input, fails the check. ``reported`` counts are shown
    and never fail it (another user's malformed record is counted, never a reason to fail this one).
    """

    counts: dict[str, int] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    reported: dict[str, int] = field(default_factory=dict)
    note: str = ""  # PII-free, appended to the check's detail


@dataclass(frozen=True)
class Swept:
    """What a sweep removed from one store (``found``) and what it saw and kept (``reported``)."""

    found: dict[str, int] = field(default_factory=dict)
    reported: dict[str, int] = field(default_factory=dict)


Beat = Callable[[dict[str, Any]], None]


def _covers_nothing(_item_id: str | None, _text: str) -> bool:
    return False


@dataclass(frozen=True)
class ForgetScope:
    """What one item forget or one session erasure covers, for a store's ``forget_items``.

    ``memory_ids``: the subject's items forgotten and the rows derived from them (random UUIDs);
    ``session_ref``: an erased session (``session_ref(subject key, session id)``), else ``None``;
    ``covers``: the forget's tombstone as a predicate on (item id or ``None``, text): by id, by a forgotten
    span, by an erased session's whole text; ``session_id`` (the erased session's own id: the key of its
    rows and objects) and ``user_id`` (the raw id, for stores that file rows under it), while the request
    holds them. In memory only: nothing of it reaches Temporal."""

    request_id: str
    subject_key: str
    app_name: str
    strength: str  # forget | erase_session
    memory_ids: frozenset[str] = frozenset()
    session_ref: str | None = None
    covers: Callable[[str | None, str], bool] = _covers_nothing
    session_id: str | None = None
    user_id: str | None = None

    def erased_session(self) -> str | None:
        """The session a session erasure removes, else ``None`` (an item forget, or no session recorded)."""
        return self.session_id if self.strength == "erase_session" and self.session_id else None

    def raw_user_id(self) -> str:
        """The raw id, for a store that files rows under it (fails where the request no longer holds it)."""
        if self.user_id is None:
            raise ValueError("the forget's raw user id is not known here")
        return self.user_id


@runtime_checkable
class EraseAdapter(Protocol):
    name: str
    after: tuple[str, ...]
    batched: bool  # long-running: the step gets a heartbeat timeout and resumes from its cursor

    def locate(self, subject: Subject) -> dict[str, int]: ...

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]: ...

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining: ...

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept: ...

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]: ...


@runtime_checkable
class ItemForgetting(Protocol):
    """The optional capability of an adapter whose store holds copies of memory items (see the module):
    ``forget_items`` forgets them; ``items_left`` is the forget verification's read of what the scope still
    covers there, written apart from ``forget_items`` (its own reads), so one bug cannot hide itself."""

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]: ...

    def items_left(self, scope: ForgetScope) -> int: ...


@dataclass(frozen=True)
class ItemsCheck:
    """How the forget verification shows one store's ``items_left``: the check's name and its count's."""

    name: str
    count: str = "items_left"


@runtime_checkable
class ScopedItemForgetting(Protocol):
    """Optional, beside ``ItemForgetting``: ``items_check(scope)`` is this store's check for ``scope``, or
    ``None`` where the scope leaves nothing in the store to check (a store that acts only on a session
    erasure, asked about an item forget; the data keys, which hold no item content, always). The built-in
    stores keep the names their checks had before they forgot through their adapters, so receipts read the
    same. Without it: the adapter's name and ``items_left``, for every scope."""

    def items_check(self, scope: ForgetScope) -> ItemsCheck | None: ...


@runtime_checkable
class StartCapture(Protocol):
    """The optional capability of an adapter whose store can name, at the request's start, what it holds for
    the subject by PII-free references its check reads back by key (the response cache's entry digests):
    ``begin_request`` records them before any step runs, so the check does not depend on what the erase step
    itself recorded, nor on an index the erase could drop first."""

    def capture(self, subject: Subject) -> list[str]: ...


@dataclass(frozen=True)
class StoreCheck:
    """One store's readiness, for ``erasure worker --check`` (one line, PII-free)."""

    ok: bool
    detail: str


@runtime_checkable
class Checked(Protocol):
    """The optional capability of an adapter whose store can say whether it is ready (its directory
    writable, its client installed, its server answering): ``erasure worker --check`` runs ``check()`` of
    every registered adapter that has it, as a part named after the adapter."""

    def check(self) -> StoreCheck: ...


@runtime_checkable
class Seeded(Protocol):
    """The optional capability the seeders call (``workers/stack/seeding``, outside the runtime code): write
    demo data of one user into the store, from ``rng`` (a generator of the store's own, so the other stores'
    seeded data does not change), and return counts."""

    def seed(self, app_name: str, user_id: str, rng: random.Random) -> dict[str, int]: ...


@dataclass(frozen=True)
class Coverage:
    """Whether the store's own evidence shows a physical pass over one request's deletions (PII-free)."""

    covered: bool
    note: str = ""
    #: what the store itself showed (counters, revisions): the attestation carries it
    evidence: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class PhysicalCleanup(Protocol):
    """The capability of a physical clean-up adapter (``after_sweep``) that the platform's physical job runs
    (issue 30): one pass covering many finished requests, then each judged from the store's own evidence.
    ``cover_requests`` reads the store's state as the requests' baseline (their deletions have all landed),
    runs the pass (heartbeating ``beat``) and returns counts; ``coverage`` judges one request."""

    def cover_requests(self, request_ids: Sequence[str], beat: Beat) -> dict[str, int]: ...

    def coverage(self, request_id: str) -> Coverage: ...


@dataclass(frozen=True)
class DataClaims:
    """What one adapter's erase and check cover, for the data map check (``stores.operations.data_map``):
    ``tables`` (Postgres tables, by name in the platform's schema), ``prefixes`` (``<bucket>/<top-level
    prefix>``; ``<bucket>/`` claims the whole bucket), ``keyspaces`` (cache key prefixes, ``rc:e:``) and
    ``collections`` (``<engine>/<collection>``: ``qdrant/memories``, ``chroma/memories``). A place that holds
    user data and that no adapter (nor the erasure's own bookkeeping list) claims fails the check."""

    tables: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    keyspaces: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()


@runtime_checkable
class Claims(Protocol):
    """The optional capability of an adapter whose store holds user data in places the data map discovers
    (tables, bucket prefixes, cache keyspaces, collections): ``claims()`` names them (see ``DataClaims``).
    Claiming a place says this adapter's ``erase`` and ``remaining`` cover the user data in it."""

    def claims(self) -> DataClaims: ...


@runtime_checkable
class VacuumTables(Protocol):
    """The optional capability of an adapter whose ``erase`` (and item forgetting, sweeps) deletes rows from
    Postgres tables: ``vacuum_tables()`` names them (bare names, or ``schema.table``), and the physical
    clean-up's vacuum (``stores.physical.vacuum``) vacuums and attests them. An adapter without it that
    ``claims()`` tables has its claimed tables vacuumed: a store that says it keeps user data in a table is
    vacuumed unless it says otherwise (the keys store does: the physical job rewrites ``data_keys`` whole)."""

    def vacuum_tables(self) -> tuple[str, ...]: ...


@runtime_checkable
class SeesPeers(Protocol):
    """The optional capability of an adapter whose work follows the other registered adapters' (the vacuum:
    their tables): the registry calls ``see_peers`` with every adapter of its plan once it is built."""

    def see_peers(self, adapters: Sequence[EraseAdapter]) -> None: ...


AdapterFactory = Callable[[StoreContext], EraseAdapter]

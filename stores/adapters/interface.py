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

A factory (the entry point's value, called with the ``Platform``) raises ``AdapterNotConfigured`` when the
platform has no such store: it is then left out of every plan. Everything an adapter returns is PII-free:
counts, and digests that cannot be reversed. The raw user id
is in ``Subject.user_id`` only while the request still holds it (``None`` afterwards: subject-key mode).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from stores.platform import Platform
    from stores.request_record import RequestRecord

#: ``after`` entry meaning: after every adapter that does not itself declare it.
AFTER_EVERY_OTHER = "*"
#: the entry-point group a package registers its adapters in (value: a factory ``(Platform) -> adapter``)
ENTRY_POINT_GROUP = "erasure.adapters"


class AdapterNotConfigured(Exception):
    """Raised by an adapter's factory when this platform has no such store: it is left out of every plan."""


@dataclass(frozen=True)
class Subject:
    """Whose data, for one call: the request, the pseudonymous subject key, the app, the raw id if known."""

    request_id: str
    subject_key: str
    app_name: str
    user_id: str | None = None  # None once the request forgot it (re-verification, scheduled sweeps)


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


AdapterFactory = Callable[["Platform"], EraseAdapter]

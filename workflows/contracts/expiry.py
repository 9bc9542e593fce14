"""The PII-free dataclasses of the retention-expiry sweep, and its activity declarations.

The sweep sees subject keys, app names, memory ids (random UUIDs), request ids and counts; the raw user id
of an expired row is read from the row by the filing activity and sealed in the forget request store, never
returned to Temporal. Its last activity (``expiry_stores``) runs the other stores' lifecycle capabilities and
returns counts only. Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import activity

from workflows.contracts.declarations import declared_only

EXPIRY_WORKFLOW = "ExpirySweepWorkflow"
#: the id each scheduled run starts with (continue-as-new keeps it)
EXPIRY_RUN_ID = "expiry-sweep-run"
#: the chain's last run also runs the registered stores' lifecycle capabilities (``expiry_stores``)
STORES_PATCH = "expiry-stores-lifecycle-v1"


class ExpiryActivityNames:
    PAGE = "expiry_page"
    FILE = "expiry_file"
    STORES = "expiry_stores"


@dataclass(frozen=True)
class ExpiryCounts:
    rows: int = 0  # expired rows seen
    groups: int = 0  # (subject, app) groups of them
    filed: int = 0  # forget requests filed (new) by this chain
    completed: int = 0  # their forgets completed
    held: int = 0  # forgets that ended held (a hold placed after filing)
    failed: int = 0  # forgets that failed or whose verification failed
    in_flight: int = 0  # groups whose forget was already running (a retried or overlapping run): not awaited
    skipped_held: int = 0  # groups not filed: the subject is under a legal hold
    skipped_fenced: int = 0  # groups not filed: an erasure of the subject is running (it removes them)
    gone: int = 0  # groups whose rows were no longer there, or no longer expired, when filed
    pages: int = 0
    # the other stores' lifecycle (``expiry_stores``): items expired, superseded, evicted; kept for a hold
    stores_expired: int = 0
    stores_superseded: int = 0
    stores_evicted: int = 0
    stores_held: int = 0
    stores_failed: int = 0  # lifecycle passes that failed after their retries (the next run tries again)


@dataclass(frozen=True)
class ExpiryInput:
    page_size: int = 200
    pages_per_run: int = 10  # continue-as-new after this many pages: every run's history stays small
    concurrency: int = 4  # forgets in flight at once
    #: the cut-off, fixed by the chain's first run (ISO 8601; empty: ``workflow.now()``): rows that expire
    #: while the sweep runs wait for the next scheduled run, so a chain always ends
    now: str = ""
    after_expires_at: str = ""  # keyset cursor (ISO 8601) ...
    after_id: str = ""  # ... and the last row id of it
    so_far: ExpiryCounts = field(default_factory=ExpiryCounts)


@dataclass(frozen=True)
class ExpiryPageInput:
    now: str
    after_expires_at: str
    after_id: str
    limit: int


@dataclass(frozen=True)
class ExpiryGroup:
    subject_key: str
    app_name: str
    memory_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ExpiryPage:
    groups: list[ExpiryGroup] = field(default_factory=list)
    rows: int = 0
    last_expires_at: str = ""
    last_id: str = ""


@dataclass(frozen=True)
class ExpiryFileInput:
    subject_key: str
    app_name: str
    memory_ids: list[str]
    now: str


@dataclass(frozen=True)
class ExpiryFiled:
    outcome: str  # filed | running | skipped_held | skipped_fenced | gone
    request_id: str = ""
    memory_ids: list[str] = field(default_factory=list)  # the group's rows still there and expired


@dataclass(frozen=True)
class ExpiryStoresInput:
    now: str  # the chain's cut-off (ISO 8601): what expired by then


@dataclass(frozen=True)
class ExpiryStoresDone:
    expired: int = 0
    superseded: int = 0
    evicted: int = 0
    held: int = 0
    #: store name -> pass (expired, superseded, evicted) -> count; ``<pass>_held`` what a hold kept
    stores: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExpiryProgress:
    status: str  # running | done | continued
    now: str
    counts: ExpiryCounts
    after_expires_at: str = ""
    after_id: str = ""


@activity.defn(name=ExpiryActivityNames.PAGE)
def expiry_page(inp: ExpiryPageInput) -> ExpiryPage:
    raise declared_only()


@activity.defn(name=ExpiryActivityNames.FILE)
def expiry_file(inp: ExpiryFileInput) -> ExpiryFiled:
    raise declared_only()


@activity.defn(name=ExpiryActivityNames.STORES)
def expiry_stores(inp: ExpiryStoresInput) -> ExpiryStoresDone:
    raise declared_only()

"""The PII-free dataclasses of the physical clean-up job (issue 30), and its activity declarations.

The job sees request ids, store names, counts and times: nothing personal. Fields are only ever added with
defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import activity

from workflows.contracts.declarations import declared_only

PHYSICAL_WORKFLOW = "PhysicalCleanupWorkflow"
#: the id each scheduled run starts with (the schedule appends its time): one run at a time
PHYSICAL_RUN_ID = "physical-cleanup"
#: the signed attestation's error when requests are past their window without one
WINDOW_MISSED = "PhysicalWindowMissed"


class PhysicalActivityNames:
    BEGIN = "physical_begin"
    COVER = "physical_cover"
    ATTEST = "physical_attest"
    WATCH = "physical_watch"
    KEYS = "physical_keys"


@dataclass(frozen=True)
class PhysicalJobInput:
    limit: int = 5000  # requests one run covers at most (the oldest first; the rest wait for the next run)
    epoch_days: float = 30.0  # the key-epoch policy: the attestation states by when a shredded key is gone
    retention_days: float = 35.0
    check_hours: float = 24.0
    fail_on_overdue: bool = True  # a request past its window fails the run (after its work is done)
    #: after erasures: rewrite the keys table and switch the WAL (ERASURE_KEY_EPOCH_REWRITE: full|table|off),
    #: so the live files drop the shredded data keys' wrapped copies at once
    rewrite: str = "full"


@dataclass(frozen=True)
class PhysicalBeginInput:
    run_id: str
    limit: int


@dataclass(frozen=True)
class PhysicalBegun:
    started_at: str  # the run's bound: requests whose deletions had all landed before it
    request_ids: list[str] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)  # the physical clean-up adapters, in plan order
    erasures: int = 0  # of the requests, erasures (their data keys were shredded)


@dataclass(frozen=True)
class PhysicalCoverInput:
    run_id: str
    store: str
    request_ids: list[str]


@dataclass(frozen=True)
class PhysicalCovered:
    store: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PhysicalAttestInput:
    run_id: str
    started_at: str
    request_ids: list[str]
    stores: list[str]
    epoch_days: float = 30.0
    retention_days: float = 35.0
    check_hours: float = 24.0
    counts: dict[str, int] = field(default_factory=dict)  # what the run did, summed over its stores
    keys_table: dict[str, str] = field(default_factory=dict)  # vacuum_full / switch_wal / checkpoint -> done|...


@dataclass(frozen=True)
class PhysicalKeysInput:
    rewrite: str  # full | table | off


@dataclass(frozen=True)
class PhysicalKeysDone:
    done: dict[str, str] = field(default_factory=dict)  # vacuum_full / switch_wal / checkpoint -> done|refused|off


@dataclass(frozen=True)
class PhysicalAttested:
    attested: int = 0
    not_covered: int = 0  # left open for the next run (the store's evidence did not show the pass)


@dataclass(frozen=True)
class PhysicalWatch:
    open: int = 0  # requests still owed a physical pass
    overdue: int = 0  # of them, past their window
    first_overdue: list[str] = field(default_factory=list)  # request ids, oldest due first (at most 20)


@dataclass(frozen=True)
class PhysicalProgress:
    stage: str
    requests: int = 0
    stores_done: int = 0
    stores: int = 0
    attested: int = 0


@dataclass(frozen=True)
class PhysicalResult:
    run_id: str
    requests: int
    attested: int
    not_covered: int
    counts: dict[str, int]
    watch: PhysicalWatch


@activity.defn(name=PhysicalActivityNames.BEGIN)
def physical_begin(inp: PhysicalBeginInput) -> PhysicalBegun:
    raise declared_only()


@activity.defn(name=PhysicalActivityNames.COVER)
def physical_cover(inp: PhysicalCoverInput) -> PhysicalCovered:
    raise declared_only()


@activity.defn(name=PhysicalActivityNames.ATTEST)
def physical_attest(inp: PhysicalAttestInput) -> PhysicalAttested:
    raise declared_only()


@activity.defn(name=PhysicalActivityNames.KEYS)
def physical_keys(inp: PhysicalKeysInput) -> PhysicalKeysDone:
    raise declared_only()


@activity.defn(name=PhysicalActivityNames.WATCH)
def physical_watch() -> PhysicalWatch:
    raise declared_only()

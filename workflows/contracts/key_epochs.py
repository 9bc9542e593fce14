"""The PII-free dataclasses of the wrapping-key epoch job, and its activity declarations.

The job sees epoch numbers, KMS key ids, data key ids (random UUIDs, as the keyset cursor), counts and the
names of what the compaction did: nothing personal. Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import activity

from workflows.contracts.declarations import declared_only

KEY_EPOCH_WORKFLOW = "KeyEpochWorkflow"
#: the id each scheduled run starts with: one rotation at a time
KEY_EPOCH_RUN_ID = "key-epoch-rotation"
#: what the job does to the live files after re-wrapping: ``full`` (VACUUM FULL data_keys, pg_switch_wal(),
#: CHECKPOINT), ``table`` (VACUUM FULL only: a managed database that refuses the WAL functions), ``off``
REWRITE_MODES = ("full", "table", "off")


class KeyEpochActivityNames:
    OPEN = "key_epoch_open"
    REWRAP = "key_epoch_rewrap"
    RETIRE = "key_epoch_retire"
    DELETE = "key_epoch_delete"
    COMPACT = "key_epoch_compact"


@dataclass(frozen=True)
class KeyEpochInput:
    epoch_days: float = 30.0  # ERASURE_KEY_EPOCH_DAYS: how old the current epoch may get
    retention_days: float = 35.0  # ERASURE_BACKUP_RETENTION_DAYS: the longest backup retention
    check_hours: float = 24.0  # how often the schedule runs the job
    rewrite: str = "full"  # one of REWRITE_MODES (ERASURE_KEY_EPOCH_REWRITE)
    force: bool = False  # open a new epoch now, however young the current one is
    page_size: int = 200
    pages_per_activity: int = 50  # pages per re-wrap attempt (it heartbeats its cursor after each page)


@dataclass(frozen=True)
class KeyEpochOpenInput:
    epoch_days: float
    retention_days: float
    check_hours: float
    force: bool = False


@dataclass(frozen=True)
class KeyEpochOpened:
    epoch: int  # the current epoch (0: the configured key; per-user mode: nothing rotates)
    opened: bool  # this run opened it
    sources: list[int] = field(default_factory=list)  # older epochs not retired yet: their keys get re-wrapped
    per_user: bool = False  # per-user KMS key mode: every subject has its own KMS key, the job has nothing to do


@dataclass(frozen=True)
class KeyEpochRewrapInput:
    source: int
    target: int
    cursor: str
    page_size: int
    max_pages: int


@dataclass(frozen=True)
class KeyEpochRewrapped:
    cursor: str
    done: bool  # no more keys of the source epoch after the cursor
    rewrapped: int = 0
    gone: int = 0  # shredded meanwhile (never re-wrapped)
    pages: int = 0
    skipped_shredded: int = 0  # rows carrying a shredded key's id (an erased subject's key written back): skipped


@dataclass(frozen=True)
class KeyEpochRetireInput:
    epoch: int


@dataclass(frozen=True)
class KeyEpochRetired:
    retired: bool  # no live data key uses it any more (else keys were written under it meanwhile: walk again)
    retired_at: str = ""


@dataclass(frozen=True)
class KeyEpochDeleteInput:
    epoch_days: float
    retention_days: float
    check_hours: float


@dataclass(frozen=True)
class KeyEpochDeletions:
    scheduled: list[int] = field(default_factory=list)  # epochs whose KMS key this run scheduled for deletion
    waiting: dict[str, str] = field(default_factory=dict)  # retired epoch -> when its key may go (ISO 8601)
    #: the configured key's epoch, retired: from when the operator may schedule its deletion ('' if not yet)
    configured_key_deletable_from: str = ""


@dataclass(frozen=True)
class KeyEpochCompactInput:
    rewrite: str


@dataclass(frozen=True)
class KeyEpochCompacted:
    done: dict[str, str] = field(default_factory=dict)  # vacuum_full / switch_wal / checkpoint -> done|refused|off


@dataclass(frozen=True)
class KeyEpochResult:
    status: str  # done | per_user (nothing to rotate)
    epoch: int = 0
    opened: bool = False
    rewrapped: int = 0
    gone: int = 0
    retired: list[int] = field(default_factory=list)
    deletions: KeyEpochDeletions = field(default_factory=KeyEpochDeletions)
    compaction: dict[str, str] = field(default_factory=dict)
    skipped_shredded: int = 0  # rows carrying a shredded key's id (erased subjects'): never re-wrapped


@dataclass(frozen=True)
class KeyEpochProgress:
    status: str  # opening | rewrapping | retiring | deleting | compacting | done | per_user
    epoch: int
    source: int
    rewrapped: int
    gone: int


@activity.defn(name=KeyEpochActivityNames.OPEN)
def key_epoch_open(inp: KeyEpochOpenInput) -> KeyEpochOpened:
    raise declared_only()


@activity.defn(name=KeyEpochActivityNames.REWRAP)
def key_epoch_rewrap(inp: KeyEpochRewrapInput) -> KeyEpochRewrapped:
    raise declared_only()


@activity.defn(name=KeyEpochActivityNames.RETIRE)
def key_epoch_retire(inp: KeyEpochRetireInput) -> KeyEpochRetired:
    raise declared_only()


@activity.defn(name=KeyEpochActivityNames.DELETE)
def key_epoch_delete(inp: KeyEpochDeleteInput) -> KeyEpochDeletions:
    raise declared_only()


@activity.defn(name=KeyEpochActivityNames.COMPACT)
def key_epoch_compact(inp: KeyEpochCompactInput) -> KeyEpochCompacted:
    raise declared_only()

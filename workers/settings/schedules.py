"""The scheduled jobs: the late-writer and retention-expiry sweeps, wrapping-key epochs, the physical
clean-up's window and interval, and the crash drills' pause."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ScheduleSettings(BaseModel):
    """How often the scheduled jobs run and the windows they keep."""

    sweep_interval_minutes: int = Field(default=60, ge=1, description="How often the scheduled late-writer sweep runs.")
    sweep_lookback_hours: int = Field(
        default=720, ge=1, description="The sweep checks every subject erased within this many hours."
    )
    expiry_interval_minutes: int = Field(
        default=60,
        ge=1,
        description="How often the scheduled retention-expiry sweep forgets memory rows whose retention ended.",
    )
    key_epoch_days: float = Field(
        default=30.0,
        gt=0,
        description="Wrapping-key epochs: age at which the scheduled key-epoch job opens a new epoch (a new KMS "
        "key) and re-wraps every live data key under it. A shredded data key is unwrappable everywhere "
        "(backups, WAL) by shred + this + ERASURE_BACKUP_RETENTION_DAYS + two days (docs/privacy-model.md).",
    )
    backup_retention_days: float = Field(
        default=35.0,
        ge=0,
        description="The longest retention of any database backup, snapshot or WAL archive: a retired epoch's "
        "KMS key is scheduled for deletion this long after no live data key uses it.",
    )
    key_epoch_rewrite: Literal["full", "table", "off"] = Field(
        default="full",
        description="After a rotation the key-epoch job, and after erasures the physical clean-up job, rewrite "
        "the keys table and the WAL: full (VACUUM FULL data_keys, pg_switch_wal(), CHECKPOINT), table (VACUUM FULL "
        "only: a managed database without the WAL functions) or off.",
    )
    physical_window_minutes: float = Field(
        default=0,
        ge=0,
        description="The physical clean-up window: a finished erasure or destructive forget gets its physical "
        "attestation (vacuum and compaction done, signed) within this many minutes of its deletions, or the "
        "physical job's watch fails and erasure_physical_overdue counts it. 0: 1440 (24 h) in production, "
        "5 on the local stack (so make demo shows both documents).",
    )
    physical_interval_minutes: float = Field(
        default=0,
        ge=0,
        description="How often the scheduled physical clean-up job runs (one run at a time, on the physical "
        "task queue). 0: a quarter of the window (at least a minute).",
    )
    chaos_pause_ms: int = Field(
        default=0,
        ge=0,
        description="Crash drills only: pause after every heartbeat so a kill lands inside a batched step.",
    )

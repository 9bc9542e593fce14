"""The erasure itself: the KMS key that wraps per-user data keys (or one key per user) and how long an
unwrapped key stays cached, the wait before the second sweep, and the due date."""

from __future__ import annotations

from pydantic import BaseModel, Field

from workers.settings.names import REQUIRED_IN_PRODUCTION


class ErasureSettings(BaseModel):
    """The erasure's keys and timing."""

    kms_key_id: str = Field(
        default="",
        description="KMS key that wraps per-user data keys. Empty: the key created by 'erasure stack up'.",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    per_user_kms_keys: bool = Field(
        default=False,
        description="true: each subject's data keys are wrapped by a KMS key of its own, scheduled for deletion "
        "by the erasure.",
    )
    key_cache_ttl_seconds: float = Field(
        default=30.0, ge=0, le=86400, description="Seconds an unwrapped data key stays cached in memory (0: no cache)."
    )
    ingestion_delay_seconds: int = Field(
        default=3600, ge=0, description="Longest ingestion delay: the durable wait before the second sweep."
    )
    due_days: int = Field(default=30, ge=1, description="Days from receipt to a request's due date.")

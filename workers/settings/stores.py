"""The agent platform's other stores: the response cache, the Chroma memory backend, and the memory
service's caps and the purpose and retention of memories ingested from sessions."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from workers.settings.names import Port, file_help


class PlatformStoreSettings(BaseModel):
    """The response cache, Chroma and the memory service."""

    cache_url: SecretStr = Field(
        default=SecretStr(""),
        description="Redis-protocol URL of the LLM response cache (a secret: it may hold a password). Empty: "
        "the local Valkey on ERASURE_CACHE_PORT in local mode, no response cache in production; 'none': no "
        "response cache.",
    )
    cache_url_file: str = Field(default="", description=file_help("cache_url"))
    cache_port: Port = Field(default=4600, description="Port of the local Valkey (the response cache).")
    chroma_path: str = Field(
        default="",
        description="Directory of the Chroma memory backend (embedded persistent mode; the erasure worker must "
        "see the same files the platform writes). Empty: <state dir>/chroma in local mode when chromadb is "
        "installed, none in production; 'none': no Chroma backend.",
    )
    memory_max_records: int = Field(
        default=500, ge=1, description="Per-user cap on memory rows; the memory service evicts above it."
    )
    memory_max_tokens: int = Field(
        default=40_000,
        ge=1,
        description="Per-user cap on remembered words (tokens); the memory service evicts above it.",
    )
    memory_session_purpose: str = Field(
        default="conversation_recall",
        description="The purpose the platform names for memories ingested from sessions (a write without a purpose "
        "is refused).",
    )
    memory_session_retention: str = Field(
        default="conversation",
        description="The retention class of memories ingested from sessions (one of "
        "stores.memory.lifecycle_rules.RETENTION_CLASSES).",
    )

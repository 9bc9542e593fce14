"""The agent platform's data layer, wired from explicit configuration (no settings import here)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.artifacts.bucket import ArtifactEraser
from stores.books.approvals import ApprovalStore
from stores.books.requests import RequestStore
from stores.forgetting.requests import ForgetRequestStore
from stores.infra.aws_clients import AwsEndpoints, kms_client, s3_client
from stores.infra.pool_check import RecentlyUsedCheck
from stores.infra.tracing import TracedCursor
from stores.ledgers.forget_tombstones import ForgetLedger
from stores.ledgers.lifecycle_journal import LifecycleJournal
from stores.ledgers.tombstones import TombstoneLedger
from stores.logs.archive import LogArchive
from stores.memory.lifecycle_rules import Caps
from stores.memory.rows import MemoryEraser, MemoryStore
from stores.memory.states import MemoryStates
from stores.privacy.keys import DataKeyStore
from stores.sessions.adk_tables import SessionStore
from stores.sessions.schema import sqlalchemy_url

if TYPE_CHECKING:
    from google.adk.sessions import DatabaseSessionService
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client

    from stores.adapters.registry import AdapterRegistry
    from stores.artifacts.service import S3ArtifactService
    from stores.chroma.collection import ChromaMemory
    from stores.memory.service import FencedMemoryService
    from stores.response_cache.cache import ResponseCache
    from stores.sessions.sealed_service import SealedSessionService


@dataclass(frozen=True)
class PlatformConfig:
    postgres_url: str
    aws: AwsEndpoints
    artifact_bucket: str
    log_bucket: str
    receipt_bucket: str
    kms_key_id: str
    subject_secret: bytes
    pool_size: int = 8
    key_cache_ttl: float = 30.0
    per_user_kms_keys: bool = False
    s3_delete_batch: int = 1000
    pool_timeout: float = 5.0
    cache_url: str | None = None  # the Redis-protocol response cache; None: the platform has none
    chroma_path: str | None = None  # the Chroma memory backend's directory; None: the platform has none
    s3_compaction_url: str | None = None  # the SeaweedFS master that compacts volumes; None: not offered
    s3_filer_url: str | None = None  # its filer: a marker through the deletion queue; None: a fixed wait
    webhook_urls: tuple[str, ...] = ()  # console-filed requests: signed webhooks on every state change
    webhook_secret: bytes = b""
    #: where a forwarded request's status callbacks may go (``stores.infra.outbound``); empty: nowhere
    callback_allowlist: tuple[str, ...] = ()
    smtp_url: str | None = None  # the data subject's notice on completion; None: not sent
    mail_from: str = "privacy@localhost"
    memory_caps: Caps = field(default_factory=Caps)  # per-user caps the memory service enforces by eviction
    #: (purpose, retention class) of memories ingested from sessions: the platform names why it keeps them
    session_capture: tuple[str, str] = ("conversation_recall", "conversation")


class Platform:
    """Clients built once and shared: the worker, the CLI, the seeder and the tests all use this."""

    def __init__(self, config: PlatformConfig) -> None:
        self.config = config
        self.pool_check = RecentlyUsedCheck()
        self.pool = ConnectionPool(
            config.postgres_url,
            min_size=1,
            max_size=config.pool_size,
            # statements are child spans of the current trace, if any (stores/infra/tracing.py)
            kwargs={"autocommit": True, "cursor_factory": TracedCursor},
            open=True,
            # a restarted database never hands out dead connections; one back from use a moment ago is not
            # checked again (stores/infra/pool_check.py)
            check=self.pool_check.check,
            reset=self.pool_check.reset,
            # fail fast while the database is away: Temporal's retry (with backoff, visible in the
            # history) is the place to wait, not a thread blocked inside a pool
            timeout=config.pool_timeout,
        )
        self.s3: S3Client = s3_client(config.aws)
        self.kms: KMSClient = kms_client(config.aws)

    def close(self) -> None:
        self.pool.close()
        cache = self.__dict__.get("response_cache")
        if cache is not None:
            cache.close()

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @cached_property
    def keys(self) -> DataKeyStore:
        return DataKeyStore(
            self.pool,
            self.kms,
            self.config.kms_key_id,
            cache_ttl=self.config.key_cache_ttl,
            per_user_kms_keys=self.config.per_user_kms_keys,
        )

    @cached_property
    def ledger(self) -> TombstoneLedger:
        return TombstoneLedger(self.pool, self.config.subject_secret)

    @cached_property
    def approvals(self) -> ApprovalStore:
        return ApprovalStore(self.pool, self.config.subject_secret)

    @cached_property
    def requests(self) -> RequestStore:
        return RequestStore(self.pool, self.config.subject_secret)

    @cached_property
    def sessions(self) -> SessionStore:
        return SessionStore(self.pool, self.config.subject_secret)

    @cached_property
    def artifact_service(self) -> S3ArtifactService:
        """The ADK artifact service (needs google-adk; the worker never uses it)."""
        from stores.artifacts.service import S3ArtifactService

        return S3ArtifactService(self.s3, self.config.artifact_bucket, self.keys, self.config.subject_secret)

    @cached_property
    def artifacts(self) -> ArtifactEraser:
        return ArtifactEraser(self.s3, self.config.artifact_bucket, self.config.s3_delete_batch)

    @cached_property
    def memory_store(self) -> MemoryStore:
        return MemoryStore(self.pool, self.keys, self.config.subject_secret)

    @cached_property
    def memory_service(self) -> FencedMemoryService:
        """The fenced ADK memory service (needs google-adk; the worker never uses it)."""
        from stores.memory.service import FencedMemoryService, PostgresMemoryService, SessionCapture
        from stores.memory.upkeep import MemoryUpkeep

        purpose, retention = self.config.session_capture
        inner = PostgresMemoryService(
            self.memory_store, self.config.subject_secret, capture=SessionCapture(purpose, retention)
        )
        upkeep = MemoryUpkeep(
            self.memory_store,
            self.memory_states,
            self.config.memory_caps,
            self.lifecycle_journal,
            self._cache,
            held=lambda subject: self.requests.active_hold(subject) is not None,
        )
        return FencedMemoryService(inner, self.ledger, self.config.subject_secret, self.forgetting, upkeep)

    def _cache(self) -> ResponseCache | None:
        """The response cache when the platform has one."""
        from stores.adapters.interface import AdapterNotConfigured

        try:
            return self.response_cache
        except AdapterNotConfigured:
            return None

    @cached_property
    def memory_states(self) -> MemoryStates:
        return MemoryStates(self.pool)

    @cached_property
    def lifecycle_journal(self) -> LifecycleJournal:
        """Transitions that retire memory content, kept in the receipts bucket (outside the database)."""
        return LifecycleJournal(self.s3, self.config.receipt_bucket)

    @cached_property
    def forget_requests(self) -> ForgetRequestStore:
        """Item forgetting's requests (the personal part sealed, dropped when each ends)."""
        return ForgetRequestStore(self.pool, self.requests)

    @cached_property
    def forgetting(self) -> ForgetLedger:
        """Item forgetting's tombstones (suppress, forget, erase a session)."""
        return ForgetLedger(self.pool, self.config.subject_secret)

    @cached_property
    def memory(self) -> MemoryEraser:
        return MemoryEraser(self.pool)

    @cached_property
    def logs(self) -> LogArchive:
        return LogArchive(self.s3, self.config.log_bucket, self.pool, self.config.subject_secret, self.keys)

    @cached_property
    def response_cache(self) -> ResponseCache:
        """The LLM response cache (``AdapterNotConfigured`` when the platform has none)."""
        from stores.adapters.interface import AdapterNotConfigured
        from stores.response_cache.cache import ResponseCache

        if not self.config.cache_url:
            raise AdapterNotConfigured("no response cache is configured (ERASURE_CACHE_URL)")
        return ResponseCache.connect(self.config.cache_url, self.keys, self.ledger, self.config.subject_secret)

    @cached_property
    def chroma_memory(self) -> ChromaMemory:
        """The Chroma memory backend (``AdapterNotConfigured`` when the platform has none)."""
        from stores.adapters.interface import AdapterNotConfigured

        if not self.config.chroma_path:
            raise AdapterNotConfigured("no Chroma memory backend is configured (ERASURE_CHROMA_PATH)")
        if importlib.util.find_spec("chromadb") is None:  # an extra: erasure-orchestrator[chroma]
            raise AdapterNotConfigured("chromadb is not installed")
        from stores.chroma.collection import ChromaMemory

        return ChromaMemory(self.config.chroma_path, self.keys, self.ledger, self.config.subject_secret)

    @cached_property
    def adapters(self) -> AdapterRegistry:
        """Every registered erase adapter (entry points ``erasure.adapters``), in plan order."""
        from stores.adapters.registry import AdapterRegistry

        return AdapterRegistry(self)

    def adk_session_service(self) -> SealedSessionService:
        """The session service agents use: google-adk's, with user content sealed under the user's data key
        (``stores.sessions.sealed_service``); call from async code."""
        from stores.sessions.sealed_service import SealedSessionService

        return SealedSessionService(
            sqlalchemy_url(self.config.postgres_url), keys=self.keys, subject_secret=self.config.subject_secret
        )

    def plain_adk_session_service(self) -> DatabaseSessionService:
        """google-adk's own session service, writing plain text: baselines and legacy rows only."""
        from google.adk.sessions import DatabaseSessionService

        return DatabaseSessionService(db_url=sqlalchemy_url(self.config.postgres_url))

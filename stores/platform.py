"""The agent platform's data layer, wired from explicit configuration (no settings import here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.adapters.context import Buckets, StoreContext
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
from stores.logs.archive import LogArchive, shared_archive
from stores.memory.eraser import MemoryEraser
from stores.memory.lifecycle_rules import Caps
from stores.memory.states import MemoryStates
from stores.memory.store import MemoryStore
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
    #: the settings of stores the platform knows nothing of (``ERASURE_<NAME>`` variables by ``name``, e.g.
    #: ``qdrant_path``): handed to their adapters through ``StoreContext.options``
    store_options: Mapping[str, str | None] = field(default_factory=dict)
    #: the physical clean-up window: a finished request's physical attestation is owed this long after its
    #: deletions (``stores.books.physical_pending``; the platform job covers it)
    physical_window: timedelta = timedelta(hours=24)


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
        self._adapters: AdapterRegistry | None = None
        self._build_adapters: Callable[[], AdapterRegistry] | None = None

    def close(self) -> None:
        self.pool.close()
        context = self.__dict__.get("store_context")
        if context is not None:
            context.close()  # the shared clients that need it: the response cache's connection, ...

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @cached_property
    def store_context(self) -> StoreContext:
        """What the stores' adapters are given (``stores.adapters.context``): this platform's clients, its
        keys and books, and the stores' options; the clients it shares with them are built in it."""
        config = self.config
        options: dict[str, str | None] = {
            "cache_url": config.cache_url,
            "chroma_path": config.chroma_path,
            "s3_compaction_url": config.s3_compaction_url,
            "s3_filer_url": config.s3_filer_url,
        }
        return StoreContext(
            pool=self.pool,
            s3=self.s3,
            kms=self.kms,
            subject_secret=config.subject_secret,
            keys=self.keys,
            ledger=self.ledger,
            requests=self.requests,
            buckets=Buckets(config.artifact_bucket, config.log_bucket, config.receipt_bucket),
            s3_delete_batch=config.s3_delete_batch,
            options={**config.store_options, **options},
        )

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

        return S3ArtifactService(self.s3, self.config.artifact_bucket, self.keys, self.config.subject_secret, self.pool)

    @cached_property
    def artifacts(self) -> ArtifactEraser:
        return ArtifactEraser(self.s3, self.config.artifact_bucket, self.pool, self.config.s3_delete_batch)

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

    @property
    def logs(self) -> LogArchive:
        return shared_archive(self.store_context)

    @property
    def response_cache(self) -> ResponseCache:
        """The LLM response cache (``AdapterNotConfigured`` when the platform has none)."""
        from stores.response_cache.cache import shared_cache

        return shared_cache(self.store_context)

    @property
    def chroma_memory(self) -> ChromaMemory:
        """The Chroma memory backend (``AdapterNotConfigured`` when the platform has none)."""
        from stores.chroma.collection import shared_memory

        return shared_memory(self.store_context)

    def wire_adapters(self, build: Callable[[], AdapterRegistry]) -> None:
        """How this process builds its adapter registry (``workers.wiring``), called on first use."""
        self._build_adapters = build

    @property
    def adapters_wired(self) -> bool:
        """Whether this platform has an adapter registry (built, or wired to be built on first use)."""
        return self._adapters is not None or self._build_adapters is not None

    @property
    def adapters(self) -> AdapterRegistry:
        """Every registered erase adapter, in plan order: the registry the wiring built (on first use)."""
        if self._adapters is None:
            if self._build_adapters is None:
                raise RuntimeError("no adapter registry is wired to this platform (workers.wiring.build_platform)")
            self._adapters = self._build_adapters()
        return self._adapters

    @adapters.setter
    def adapters(self, registry: AdapterRegistry) -> None:
        self._adapters = registry

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

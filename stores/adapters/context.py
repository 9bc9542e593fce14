"""What an adapter's factory is given: the lower layers' clients, not the ``Platform``.

The entry point's value is a factory called with one argument, a ``StoreContext``: the database pool, the
S3 and KMS clients, the identity secret, the data-key service, the erasure's tombstone ledger and request
books, the platform's bucket names, and the stores' options (settings by name: ``cache_url``,
``chroma_path``, ``qdrant_path``, ...; wiring fills them from the platform's configuration and from every
``ERASURE_<NAME>`` environment variable the worker's settings do not define). A store takes only what it
uses and builds its own client from it; a client the platform's services share with the adapter (the log
archive's segment lock, the response cache's connection) is built once per context with ``shared``.

Every factory, the project's own and a plug-in's, gets this context and nothing else (the ``PluginContext``
that handed older plug-ins the ``Platform`` is gone: issue 41).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client
    from psycopg_pool import ConnectionPool

    from stores.books.requests import RequestStore
    from stores.ledgers.tombstones import TombstoneLedger
    from stores.privacy.keys import DataKeyStore

T = TypeVar("T")


class AdapterNotConfigured(Exception):
    """Raised by an adapter's factory when this platform has no such store: it is left out of every plan."""


@dataclass(frozen=True)
class Buckets:
    """The platform's S3 buckets, by role."""

    artifacts: str
    logs: str
    receipts: str


@dataclass(frozen=True, eq=False)
class StoreContext:
    """The lower layers an adapter may use (see the module); one per process, built by the platform."""

    pool: ConnectionPool
    s3: S3Client
    kms: KMSClient
    subject_secret: bytes
    keys: DataKeyStore
    ledger: TombstoneLedger
    requests: RequestStore
    buckets: Buckets
    s3_delete_batch: int = 1000
    #: the stores' settings by name (``None`` or absent: not configured)
    options: Mapping[str, str | None] = field(default_factory=dict)
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closing: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def option(self, name: str) -> str | None:
        """A store's setting (``None`` when absent or empty)."""
        return self.options.get(name) or None

    def required(self, name: str, what: str) -> str:
        """A store's setting, or ``AdapterNotConfigured`` naming ``what`` and its variable when it is absent."""
        value = self.option(name)
        if value is None or value.lower() == "none":
            raise AdapterNotConfigured(f"no {what} is configured (ERASURE_{name.upper()})")
        return value

    def shared(self, key: str, build: Callable[[], T], close: Callable[[T], None] | None = None) -> T:
        """One client per context under ``key`` (built on first use), shared by the platform and the adapter;
        ``close`` is called on it by ``close()`` (the platform's)."""
        with self._lock:
            if key not in self._shared:
                built = self._shared[key] = build()
                if close is not None:
                    self._closing.append(lambda: close(built))
            return self._shared[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the shared clients that asked for it, newest first."""
        with self._lock:
            closing, self._closing[:] = list(self._closing), []
        for close in reversed(closing):
            close()

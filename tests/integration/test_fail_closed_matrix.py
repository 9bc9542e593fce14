"""Checks never fail open (issue 39), generated: every registered store's check against a broken store.

For each adapter the platform registers (entry points: a new store is in this matrix with no new test), its
``remaining`` (the verifier's check of that store) is run for a real, completed erasure, through an adapter
built by the store's own factory from a context whose clients all fail: the database (every connection
refused), S3 (every call raises ``EndpointConnectionError``), KMS (``KMSInternalException``), the cache (a
closed port) and the file-backed stores (their root is a file, not a directory). The check must raise, so the
activity retries and then fails the verification with the cause; a ``Remaining`` with zero counts would be a
check that passed without having read anything.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from importlib.metadata import entry_points
from typing import Any

import psycopg
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from stores.adapters.context import StoreContext
from stores.adapters.interface import AdapterNotConfigured, Remaining, Subject
from stores.adapters.registry import discovered
from stores.books.requests import RequestStore
from stores.ledgers.tombstones import TombstoneLedger
from stores.privacy.keys import DataKeyStore
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "fail-closed-matrix"


class FailingPool:
    """A pool whose every connection fails as a database that went away does."""

    def connection(self, *_args: Any, **_kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused (injected)")


class FailingClient:
    """An AWS client whose every call raises ``error`` (its ``exceptions`` still answer, as botocore's do)."""

    def __init__(self, inner: Any, error: Exception) -> None:
        self._inner, self._error = inner, error

    def __getattr__(self, name: str) -> Any:
        if name in ("exceptions", "meta"):
            return getattr(self._inner, name)

        def fail(*_args: Any, **_kwargs: Any) -> Any:
            raise self._error

        return fail


def broken(context: StoreContext, root_file: str, dead_url: str) -> StoreContext:
    pool: Any = FailingPool()
    kms: Any = FailingClient(
        context.kms, ClientError({"Error": {"Code": "KMSInternalException", "Message": "injected"}}, "Decrypt")
    )
    s3: Any = FailingClient(context.s3, EndpointConnectionError(endpoint_url="http://s3.invalid"))
    options = {
        name: (dead_url if name.endswith("_url") else root_file if name.endswith("_path") else value)
        for name, value in context.options.items()
    }
    return dataclasses.replace(
        context,
        pool=pool,
        s3=s3,
        kms=kms,
        keys=DataKeyStore(pool, kms, "alias/injected"),
        ledger=TombstoneLedger(pool, context.subject_secret),
        requests=RequestStore(pool, bytes(32)),
        options=options,
        _shared={},
        _lock=threading.Lock(),
        _closing=[],
    )


@pytest.mark.parametrize("store", sorted(discovered()))
async def test_a_check_that_cannot_read_its_store_fails(saga: SagaHarness, store: str, tmp_path: Any) -> None:
    platform = saga.platform
    if store not in platform.adapters.names:
        pytest.skip(f"{store}: not configured on this platform")
    (target,) = user_ids(1, 3960 + sorted(discovered()).index(store), prefix="failclosed")
    await saga.seed(APP, [target])
    result = await saga.erase(APP, target)
    assert result.status == "completed"
    record = platform.requests.record(result.request_id)
    subject = Subject(result.request_id, result.subject_key, APP)
    healthy = platform.adapters.get(store).remaining(subject, record, None, lambda _d: None)
    assert isinstance(healthy, Remaining)
    assert not healthy.missing

    root_file = tmp_path / "not-a-directory"
    root_file.write_text("a file where the store's directory should be")
    context = broken(platform.store_context, str(root_file), f"redis://127.0.0.1:{_closed_port()}/0")
    factory = entry_points(group="erasure.adapters")[store].load()
    try:
        adapter = factory(context)
    except AdapterNotConfigured:
        pytest.fail(f"{store}: a broken store reads as not configured")
    except Exception:  # the store refused to start on a broken client: no check of it could pass
        return
    answer = answered_anyway(adapter, subject, record)
    assert answer is None, f"{store}: the check answered without reading its store: {answer}"
    # and the judgement sees a check that swallows its store's error (the planted fail-open)
    assert answered_anyway(SwallowsErrors(adapter), subject, record) is not None


def answered_anyway(adapter: Any, subject: Subject, record: Any) -> Remaining | None:
    """What the check answered on a broken store, or ``None`` when it raised (failed closed: the activity
    retries, then the check fails with the cause)."""
    try:
        return adapter.remaining(subject, record, None, lambda _d: None)  # type: ignore[no-any-return]
    except Exception:
        return None


class SwallowsErrors:
    """A check written with a broad handler around its read: an error reads as nothing left (planted)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def remaining(self, subject: Subject, record: Any, bound: Any, beat: Any) -> Remaining:
        try:
            return self.inner.remaining(subject, record, bound, beat)  # type: ignore[no-any-return]
        except Exception:
            return Remaining({})


def _closed_port() -> int:
    """A port nothing listens on: connections are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

"""Issue 39 item 4: the reads a check depends on fail closed. A KMS that errors (``KMSInternalException``, an
unreachable endpoint) or a database that errors while a data key is read is raised out of the forget
verification's store count, retention expiry's filing, an erased session's refused texts and the keys
check's ciphertext sample: never read as "nothing readable left". Only a shredded key or a damaged
ciphertext is unreadable by design.

The fault is injected where the code takes its collaborators: a platform whose data-key store runs on a
KMS client whose ``Decrypt`` raises, or on a pool whose connections fail; everything else is the real stack,
and the same rows read through the healthy platform show there was something to read."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import cached_property
from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from temporalio.testing import ActivityEnvironment

from activities.expiry import ExpiryActivities
from activities.forget import ForgetActivities
from stores.forgetting.item_forget import session_texts
from stores.forgetting.requests import ForgetRequestRow
from stores.keys.adapter import KeyReads
from stores.ledgers.forget_tombstones import TombstoneMatcher
from stores.lifecycle.retention_expiry import still_expired
from stores.memory.store import NewMemory
from stores.platform import Platform, PlatformConfig
from stores.privacy.identity import subject_key
from stores.privacy.keys import DataKeyStore
from workflows.contracts.expiry import ExpiryFileInput

pytestmark = pytest.mark.integration

APP = "fail-closed"
SEED = bytes(32)
TEXTS = ["My locker code is 4711 at the gym.", "The spare key is under the blue pot."]
PAST = datetime.now(UTC) - timedelta(days=3)  # working_context keeps a day: these expired two days ago


class FailingKms:
    """The real KMS client, but ``Decrypt`` raises ``error``: KMS failing to answer, not a key that is gone."""

    def __init__(self, inner: Any, error: Exception) -> None:
        self.inner, self.error = inner, error

    def decrypt(self, **_kwargs: Any) -> Any:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FailingPool:
    """A pool whose every connection fails as a database that went away does."""

    def connection(self, *_args: Any, **_kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused (injected)")


FAULTS: dict[str, Callable[[], Exception]] = {
    "kms_internal_error": lambda: ClientError(
        {"Error": {"Code": "KMSInternalException", "Message": "injected"}}, "Decrypt"
    ),
    "kms_unreachable": lambda: EndpointConnectionError(endpoint_url="http://kms.invalid"),
    "database_error": lambda: psycopg.OperationalError("injected"),
}


class FaultyPlatform(Platform):
    """The real platform, whose data keys are read through a failing KMS client or a failing pool."""

    def __init__(self, config: PlatformConfig, fault: str) -> None:
        super().__init__(config)
        self.fault = fault
        self.error_type = type(FAULTS[fault]())
        self.key_pool: Any = FailingPool() if fault == "database_error" else self.pool
        self.key_kms: Any = FailingKms(self.kms, FAULTS[fault]()) if fault.startswith("kms") else self.kms

    @cached_property
    def keys(self) -> DataKeyStore:
        return DataKeyStore(self.key_pool, self.key_kms, self.config.kms_key_id, cache_ttl=0.0)


@pytest.fixture(params=sorted(FAULTS))
def faulty(request: pytest.FixtureRequest, platform: Platform) -> Iterator[FaultyPlatform]:
    faulty = FaultyPlatform(platform.config, request.param)
    try:
        yield faulty
    finally:
        faulty.close()


def _user(platform: Platform, *, expired: bool = False) -> tuple[str, str, list[NewMemory]]:
    user = f"reader-{uuid.uuid4().hex[:8]}@example.org"
    lifecycle: dict[str, Any] = (
        {"purpose": "task_context", "retention_class": "working_context", "created_at": PAST} if expired else {}
    )
    rows = [NewMemory(APP, user, text, **lifecycle) for text in TEXTS]
    platform.memory_store.insert(rows)
    return user, subject_key(platform.config.subject_secret, APP, user), rows


def _sealed(platform: Platform, row_id: uuid.UUID) -> bytes:
    with platform.pool.connection() as conn:
        found = conn.execute("SELECT content_sealed FROM memories WHERE id = %s", (row_id,)).fetchone()
    assert found is not None
    return bytes(found[0])


def _forget_request(platform: Platform, sk: str) -> tuple[ForgetRequestRow, TombstoneMatcher]:
    """A forget of the locker code by a span, its tombstone placed (what ``_stored`` looks for again)."""
    request_id = f"fr-{uuid.uuid4().hex[:12]}"
    tombstone_id = platform.forgetting.place(sk, APP, "forget", spans=["locker code is 4711"], request_id=request_id)
    placed = platform.forgetting.get(tombstone_id)
    assert placed is not None
    matcher = TombstoneMatcher(platform.config.subject_secret, [placed])
    row = ForgetRequestRow(
        request_id, sk, APP, "forget", [], tombstone_id, "running", None, datetime.now(UTC), None, True
    )
    return row, matcher


def test_the_forget_verifications_store_count_raises_when_it_cannot_read(
    platform: Platform, faulty: FaultyPlatform
) -> None:
    _user_id, sk, _rows = _user(platform)
    row, matcher = _forget_request(platform, sk)
    assert ForgetActivities(platform, SEED)._stored(sk, row, matcher) == (1, 0)  # read: the span is still stored
    with pytest.raises(faulty.error_type):  # unread: an error, never (0, 0) and a passed "store" check
        ForgetActivities(faulty, SEED)._stored(sk, row, matcher)


def test_expiry_filing_raises_and_files_nothing_when_it_cannot_read_the_rows(
    platform: Platform, faulty: FaultyPlatform
) -> None:
    _user_id, sk, rows = _user(platform, expired=True)
    ids = sorted(str(r.id) for r in rows)
    now = datetime.now(UTC)
    with pytest.raises(faulty.error_type):  # never a request filed with no probes for its verification
        ActivityEnvironment().run(ExpiryActivities(faulty).expiry_file, ExpiryFileInput(sk, APP, ids, now.isoformat()))
    assert platform.forget_requests.of_subject(sk) == []
    items = still_expired(platform.pool, sk, APP, ids, now)
    assert sorted(ExpiryActivities(platform)._probes(items)) == sorted(TEXTS)  # there was something to read


def test_an_erased_sessions_refused_texts_raise_when_they_cannot_be_read(
    platform: Platform, faulty: FaultyPlatform
) -> None:
    _user_id, sk, rows = _user(platform)
    ids = [str(r.id) for r in rows]
    with platform.pool.connection() as conn:
        assert sorted(session_texts(conn, sk, ids, platform.memory_store.decrypt_row)) == sorted(TEXTS)
        with pytest.raises(faulty.error_type):  # never a tombstone that refuses nothing of the session
            session_texts(conn, sk, ids, faulty.memory_store.decrypt_row)


def test_the_keys_checks_ciphertext_sample_raises_when_kms_cannot_answer(
    platform: Platform, faulty: FaultyPlatform
) -> None:
    _user_id, _sk, rows = _user(platform)
    blob = _sealed(platform, rows[0].id)
    assert KeyReads(cast(Any, SimpleNamespace(pool=platform.pool, kms=platform.kms))).sample_decrypts(
        str(rows[0].id), blob
    )
    reads = KeyReads(cast(Any, SimpleNamespace(pool=faulty.key_pool, kms=faulty.key_kms)))
    with pytest.raises(faulty.error_type):  # never "the sample no longer decrypts" and a passed keys check
        reads.sample_decrypts(str(rows[0].id), blob)


def test_a_shredded_key_still_reads_as_nothing_readable_left(platform: Platform) -> None:
    _user_id, sk, rows = _user(platform, expired=True)
    row, matcher = _forget_request(platform, sk)
    ids = sorted(str(r.id) for r in rows)
    items = still_expired(platform.pool, sk, APP, ids, datetime.now(UTC))
    blob = _sealed(platform, rows[0].id)
    assert platform.keys.shred(sk) >= 1

    assert ForgetActivities(platform, SEED)._stored(sk, row, matcher) == (0, 0)
    assert ExpiryActivities(platform)._probes(items) == []
    with platform.pool.connection() as conn:
        assert session_texts(conn, sk, ids, platform.memory_store.decrypt_row) == []
    reads = KeyReads(cast(Any, SimpleNamespace(pool=platform.pool, kms=platform.kms)))
    assert not reads.sample_decrypts(str(rows[0].id), blob)

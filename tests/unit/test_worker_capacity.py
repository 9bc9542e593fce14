"""The erasure worker's activity slots and pollers are settings (issue 42 item 4), and ``erasure worker`` builds
its Temporal workers with them; ``ERASURE_WORKER_RUNS`` splits the erasure's worker and the physical job's into
processes of their own (the Kubernetes base runs them as two Deployments)."""

from __future__ import annotations

import argparse
import contextlib
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from stores.platform import Platform
from workers.errors import ConfigError
from workers.local_secrets import create_local_secrets
from workers.settings import Settings


class _Approvals:
    """The approval gate's store, never asked here: no activity runs."""


PLATFORM = cast(Platform, type("NoPlatform", (), {"approvals": _Approvals()})())


@activity.defn(name="capacity_noop")
def noop() -> None:
    """Never run: the worker needs one activity to be built with activity slots."""


class NoopActivities:
    def activities(self) -> list[Any]:
        return [noop]


ACTIVITIES = [NoopActivities()]


def _capacity_of(worker: Worker) -> tuple[int | None, int, Any, Any]:
    config = worker.config()
    executor = config.get("activity_executor")
    assert isinstance(executor, ThreadPoolExecutor)
    return (
        config.get("max_concurrent_activities"),
        executor._max_workers,  # one thread per slot: a slot without a thread would wait for one
        config.get("workflow_task_poller_behavior"),
        config.get("activity_task_poller_behavior"),
    )


@pytest.mark.asyncio(loop_scope="session")
async def test_the_worker_is_built_with_the_slots_and_pollers_of_the_settings(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    from workers.worker import WorkerCapacity, build_worker

    settings = Settings.from_env(
        {
            "ERASURE_MAX_CONCURRENT_ACTIVITIES": "40",
            "ERASURE_WORKFLOW_TASK_POLLERS": "3",
            "ERASURE_ACTIVITY_TASK_POLLERS": "9",
        }
    )
    worker = build_worker(
        time_skipping_env.client,
        "capacity",
        PLATFORM,
        b"",
        activities=ACTIVITIES,
        capacity=WorkerCapacity.from_settings(settings),
    )
    assert _capacity_of(worker) == (40, 40, PollerBehaviorSimpleMaximum(3), PollerBehaviorSimpleMaximum(9))


@pytest.mark.asyncio(loop_scope="session")
async def test_defaults_keep_sixteen_slots_and_the_sdks_five_pollers(time_skipping_env: WorkflowEnvironment) -> None:
    from workers.worker import WorkerCapacity, build_worker

    from_settings = build_worker(
        time_skipping_env.client,
        "d1",
        PLATFORM,
        b"",
        activities=ACTIVITIES,
        capacity=WorkerCapacity.from_settings(Settings.from_env({})),
    )
    unset = build_worker(
        time_skipping_env.client, "d2", PLATFORM, b"", activities=ACTIVITIES
    )  # the tests' embedded workers
    expected = (16, 16, PollerBehaviorSimpleMaximum(5), PollerBehaviorSimpleMaximum(5))
    assert _capacity_of(from_settings) == expected
    assert _capacity_of(unset) == expected


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("ERASURE_MAX_CONCURRENT_ACTIVITIES", "0", "ERASURE_MAX_CONCURRENT_ACTIVITIES must be at least 1"),
        # the SDK's own floor: one sticky and one normal poller
        ("ERASURE_WORKFLOW_TASK_POLLERS", "1", "ERASURE_WORKFLOW_TASK_POLLERS must be at least 2"),
        ("ERASURE_ACTIVITY_TASK_POLLERS", "0", "ERASURE_ACTIVITY_TASK_POLLERS must be at least 1"),
        ("ERASURE_ACTIVITY_TASK_POLLERS", "many", "ERASURE_ACTIVITY_TASK_POLLERS must be an integer"),
        ("ERASURE_WORKER_RUNS", "both", "ERASURE_WORKER_RUNS must be 'all', 'erasure' or 'physical'"),
    ],
)
def test_bad_capacity_is_one_line_naming_the_variable(var: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env({var: value})


@pytest.mark.parametrize(
    ("runs", "queues"),
    [
        ("all", ("erasure", "erasure-physical")),
        ("erasure", ("erasure", None)),
        ("physical", (None, "erasure-physical")),
    ],
)
def test_erasure_worker_runs_the_workers_the_settings_say_with_their_capacity(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runs: str, queues: tuple[str | None, str | None]
) -> None:
    """``erasure worker`` itself (the CLI's handler), with Temporal and the stores stood in for: what it hands
    the worker is what the settings say."""
    from workers.cli import runtime
    from workers.worker import WorkerCapacity

    seen: dict[str, Any] = {}

    async def connect(*_args: Any, **_kwargs: Any) -> object:
        return object()

    async def run_worker(_client: object, task_queue: str | None, *_args: Any, **kwargs: Any) -> None:
        seen.update(kwargs, task_queue=task_queue)

    monkeypatch.setattr("workers.temporal_client.connect", connect)
    monkeypatch.setattr("workers.credential_reload.TemporalCredentials", lambda *_a, **_k: None)
    monkeypatch.setattr("workers.worker.run_worker", run_worker)
    monkeypatch.setattr(runtime, "platform_for", lambda _settings: contextlib.nullcontext(PLATFORM))
    settings = Settings.from_env(
        {
            "ERASURE_STATE_DIR": str(tmp_path),
            "ERASURE_MAX_CONCURRENT_ACTIVITIES": "24",
            "ERASURE_ACTIVITY_TASK_POLLERS": "7",
            "ERASURE_WORKER_RUNS": runs,
        }
    )
    create_local_secrets(settings)
    assert runtime._worker(argparse.Namespace(check=False), settings) == 0
    assert (seen["task_queue"], seen["physical_task_queue"]) == queues
    assert seen["capacity"] == WorkerCapacity(activities=24, workflow_pollers=5, activity_pollers=7)

"""``erasure worker``: every workflow and activity on one task queue, with graceful shutdown.

SIGTERM (or SIGINT) stops polling and gives running activities ``GRACEFUL_SHUTDOWN`` to end. A batched
step does not start another batch once shutdown began: its next heartbeat (recorded with the progress of
the batch it just finished) is its last, and the attempt ends with a retryable ``WorkerShuttingDown``
error, so another worker resumes from those heartbeat details instead of starting the step again. Steps
without batches simply finish. Activities still running when the grace period ends are cancelled by the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    Interceptor,
    PollerBehaviorSimpleMaximum,
    Worker,
    WorkerDeploymentConfig,
)

from activities.approval_gate import ApprovalInterceptor
from activities.boundary import StepBoundary
from activities.crash_drill import CrashDrill
from activities.expiry import ExpiryActivities
from activities.fence import FenceActivities
from activities.forget import ForgetActivities
from activities.key_epochs import KeyEpochActivities
from activities.late_sweep import LateSweepActivities
from activities.notify import NotifyActivities
from activities.physical_job import PhysicalJobActivities
from activities.receipts import ReceiptActivities
from activities.reconcile import ReconcileActivities
from activities.request import RequestActivities
from activities.reseal import ResealActivities
from activities.store_steps import StoreStepActivities
from activities.verification import VerifierActivities
from stores.adapters.registry import AdapterRegistry
from stores.books.approvals import ApprovalStore
from stores.platform import Platform
from verifier.workflow import VerifierWorkflow
from workers.credential_reload import TemporalCredentials
from workers.logging_setup import get_logger
from workers.settings import Settings
from workers.settings.stack import ACTIVITY_SLOTS, TASK_POLLERS
from workflows.erasure import ErasureWorkflow
from workflows.expiry import ExpirySweepWorkflow
from workflows.foreign_payloads import ForeignPayloads
from workflows.forget import ForgetWorkflow
from workflows.key_epochs import KeyEpochWorkflow
from workflows.physical import PhysicalCleanupWorkflow
from workflows.reconcile import ReconcileRequestsWorkflow
from workflows.reseal import ResealSessionsWorkflow
from workflows.sweep import LateWriterSweepWorkflow

GRACEFUL_SHUTDOWN = timedelta(seconds=30)
#: error type of an attempt stopped at a batch boundary by worker shutdown (retryable: another worker resumes)
WORKER_SHUTTING_DOWN = "WorkerShuttingDown"
log = get_logger("workers.worker")


class _StopAfterHeartbeat(ActivityOutboundInterceptor):
    def heartbeat(self, *details: Any) -> None:
        self.next.heartbeat(*details)  # the SDK sends this heartbeat before it reports the failure below
        if activity.is_worker_shutdown():
            info = activity.info()
            log.info(
                "activity_stopped_for_shutdown",
                activity=info.activity_type,
                activity_id=info.activity_id,
                attempt=info.attempt,
            )
            raise ApplicationError(
                "worker shutting down; progress kept in the last heartbeat", type=WORKER_SHUTTING_DOWN
            )


class _StopAfterHeartbeatInbound(ActivityInboundInterceptor):
    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        self.next.init(_StopAfterHeartbeat(outbound))


class GracefulShutdown(Interceptor):
    """Once the worker is shutting down, a heartbeat ends the attempt right after it is recorded."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StopAfterHeartbeatInbound(next)


def activity_objects(platform: Platform, signing_seed: bytes, adapters: AdapterRegistry | None = None) -> list[Any]:
    """Every activity object of the worker; ``adapters`` replaces the platform's registry (embedding, tests)."""
    return [
        RequestActivities(platform),
        FenceActivities(platform),
        StoreStepActivities(platform, adapters),
        LateSweepActivities(platform),
        VerifierActivities(platform, adapters),
        ReceiptActivities(platform, signing_seed),
        NotifyActivities(platform),
        ForgetActivities(platform, signing_seed),
        ExpiryActivities(platform),
        ResealActivities(platform),
        KeyEpochActivities(platform),
        ReconcileActivities(platform),
    ]


def activity_functions(objects: Sequence[Any]) -> list[Any]:
    """The activities each object lists (its ``activities()``), in order."""
    return [fn for obj in objects for fn in obj.activities()]


def workflows() -> list[type]:
    return [
        ErasureWorkflow,
        VerifierWorkflow,
        LateWriterSweepWorkflow,
        ForgetWorkflow,
        ExpirySweepWorkflow,
        ResealSessionsWorkflow,
        KeyEpochWorkflow,
        ReconcileRequestsWorkflow,
    ]


def worker_interceptors(approvals: ApprovalStore, chaos_pause: float = 0.0) -> list[Interceptor]:
    """Every worker's interceptors, outermost first: the step boundary (error translation, log lines,
    metrics: ``activities.boundary``), the crash drill's pause only when ``chaos_pause`` is set
    (``activities.crash_drill``), the approval gate, the graceful shutdown; and for workflows, foreign
    signals and updates dropped or refused instead of failing the task (``workflows.foreign_payloads``)."""
    drill: list[Interceptor] = [CrashDrill(chaos_pause)] if chaos_pause > 0 else []
    return [StepBoundary(), *drill, ApprovalInterceptor(approvals), GracefulShutdown(), ForeignPayloads()]


@dataclass(frozen=True)
class WorkerCapacity:
    """The erasure worker's activity slots and pollers (``ERASURE_MAX_CONCURRENT_ACTIVITIES``,
    ``ERASURE_WORKFLOW_TASK_POLLERS``, ``ERASURE_ACTIVITY_TASK_POLLERS``): sized per pod by the platform team,
    who scale the pods on the activities' schedule-to-start latency (deploy/k8s/base/hpa.yaml)."""

    activities: int = ACTIVITY_SLOTS
    workflow_pollers: int = TASK_POLLERS
    activity_pollers: int = TASK_POLLERS

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerCapacity:
        return cls(settings.max_concurrent_activities, settings.workflow_task_pollers, settings.activity_task_pollers)


def build_worker(
    client: Client,
    task_queue: str,
    platform: Platform,
    signing_seed: bytes,
    *,
    activities: Sequence[Any] = (),
    deployment: WorkerDeploymentConfig | None = None,
    chaos_pause: float = 0.0,
    capacity: WorkerCapacity = WorkerCapacity(),
) -> Worker:
    """``deployment``: the Worker Deployment version to poll as (``workers.versioning``); ``None``: unversioned.
    ``chaos_pause``: crash drills only (``activities.crash_drill.CrashDrill``). One activity thread per slot,
    so a task the worker accepted never waits for a thread."""
    objects = list(activities) or activity_objects(platform, signing_seed)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=workflows(),
        activities=activity_functions(objects),
        activity_executor=ThreadPoolExecutor(max_workers=capacity.activities, thread_name_prefix="erasure-activity"),
        max_concurrent_activities=capacity.activities,
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=capacity.workflow_pollers),
        activity_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=capacity.activity_pollers),
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=worker_interceptors(platform.approvals, chaos_pause),
        # flush heartbeat details within a second, so a crash loses at most one batch of progress
        max_heartbeat_throttle_interval=timedelta(seconds=1),
        default_heartbeat_throttle_interval=timedelta(seconds=1),
        deployment_config=deployment,
    )


#: the physical job's slots: one run at a time (its schedule skips overlaps), one store's pass at a time
PHYSICAL_SLOTS = 2


def build_physical_worker(
    client: Client,
    task_queue: str,
    platform: Platform,
    signing_seed: bytes,
    *,
    deployment: WorkerDeploymentConfig | None = None,
) -> Worker:
    """The physical clean-up job's worker (issue 30): its own task queue and slots, so a vacuum or a compaction
    (and anything waiting for one) never holds an activity slot an erasure needs."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[PhysicalCleanupWorkflow],
        activities=PhysicalJobActivities(platform, signing_seed).activities(),
        activity_executor=ThreadPoolExecutor(max_workers=PHYSICAL_SLOTS, thread_name_prefix="erasure-physical"),
        max_concurrent_activities=PHYSICAL_SLOTS,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=worker_interceptors(platform.approvals),
        max_heartbeat_throttle_interval=timedelta(seconds=1),
        default_heartbeat_throttle_interval=timedelta(seconds=1),
        deployment_config=deployment,
    )


async def run_worker(
    client: Client,
    task_queue: str | None,
    platform: Platform,
    signing_seed: bytes,
    chaos_pause: float = 0.0,
    credentials: TemporalCredentials | None = None,
    deployment: WorkerDeploymentConfig | None = None,
    physical_task_queue: str | None = None,
    capacity: WorkerCapacity = WorkerCapacity(),
) -> None:
    """Run until SIGTERM or SIGINT; ``credentials`` (when given) keeps the worker's client on the Temporal
    certificate and API key files as they are now (``workers.credential_reload``). ``physical_task_queue``:
    the physical clean-up job's worker runs beside the erasure's, on that queue with its own slots; either
    queue ``None``: that worker is not run here (``ERASURE_WORKER_RUNS``: a Deployment of its own runs it)."""
    running = []
    if task_queue is not None:
        running.append(
            build_worker(
                client,
                task_queue,
                platform,
                signing_seed,
                deployment=deployment,
                chaos_pause=chaos_pause,
                capacity=capacity,
            )
        )
    if physical_task_queue is not None:
        running.append(
            build_physical_worker(client, physical_task_queue, platform, signing_seed, deployment=deployment)
        )
    if not running:
        raise ValueError("run_worker needs a task queue to poll")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    version = deployment.version.to_canonical_string() if deployment is not None else "unversioned"
    log.info(
        "worker_started",
        task_queue=task_queue,
        physical_task_queue=physical_task_queue,
        activity_slots=capacity.activities if task_queue is not None else None,
        deployment_version=version,
    )
    async with contextlib.AsyncExitStack() as stack:
        for each in running:
            await stack.enter_async_context(each)
        watching = asyncio.create_task(credentials.watch(running, stop)) if credentials is not None else None
        await stop.wait()
        log.info("worker_stopping", graceful_seconds=GRACEFUL_SHUTDOWN.total_seconds())
        if watching is not None:
            await watching
    log.info("worker_stopped")

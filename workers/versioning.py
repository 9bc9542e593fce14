"""Worker versioning: the worker's Temporal Worker Deployment version, from the settings.

With ``ERASURE_WORKER_DEPLOYMENT_NAME`` and ``ERASURE_WORKER_BUILD_ID`` set, the worker polls as version
``<name>.<build id>`` of that Worker Deployment: the server sends a workflow's tasks only to workers of the
version the workflow runs on, so old and new code no longer share one queue during a rollout. Every
workflow is pinned (``VERSIONING_BEHAVIOR``), and the erasure saga moves to the current version when it
continues as new while on hold (``workflows/erasure/``). Without the settings the worker is unversioned,
as before (the local stack, the tests). Rollout, rollback and the reasoning: deploy/README.md, "Worker
versioning".

The behavior is the worker's default, not ``@workflow.defn(versioning_behavior=...)``: the server refuses a
workflow task completed by an unversioned worker that names a behavior ("versioning behavior cannot be
specified without deployment options being set with versioned mode"), so an annotation would break every
unversioned worker. A workflow that must auto-upgrade gets its own annotation together with this note.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from temporalio.api.enums.v1 import deployment_pb2 as enums
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentCurrentVersionResponse,
    SetWorkerDeploymentRampingVersionRequest,
    SetWorkerDeploymentRampingVersionResponse,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from workers.errors import ConfigError, ErasureCliError
from workers.settings import Settings

T = TypeVar("T")

#: every workflow of a versioned worker: a run finishes on the code it started on (deploy/README.md)
VERSIONING_BEHAVIOR = VersioningBehavior.PINNED


def deployment_version(settings: Settings) -> WorkerDeploymentVersion | None:
    """The worker's version, ``None`` when versioning is not configured; a ``ConfigError`` when the deployment
    is named without a build id (the console and the setup job may name it alone; a worker may not)."""
    if not settings.worker_deployment_name:
        return None
    if not settings.worker_build_id:
        raise ConfigError(
            "ERASURE_WORKER_DEPLOYMENT_NAME is set but ERASURE_WORKER_BUILD_ID is not: a versioned worker needs "
            "the build id of its code (a new one for every release)"
        )
    return WorkerDeploymentVersion(settings.worker_deployment_name, settings.worker_build_id)


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The worker's ``deployment_config``, ``None`` (unversioned) when versioning is not configured."""
    version = deployment_version(settings)
    if version is None:
        return None
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=VERSIONING_BEHAVIOR,
    )


# ----- operating a Worker Deployment (``erasure deployment ...``; the SDK's client has no wrappers yet) -----

_STATUS = {
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE: "inactive",
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT: "current",
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING: "ramping",
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING: "draining",
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED: "drained",
    enums.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED: "created",
}


class DeploymentNotReady(ErasureCliError):
    """The Worker Deployment or the version is not known to the server (no worker of it has polled yet)."""


@dataclass(frozen=True)
class VersionState:
    build_id: str
    status: str  # inactive, current, ramping, draining (pinned workflows still open), drained, created


@dataclass(frozen=True)
class DeploymentState:
    name: str
    current: str  # build id, "" while unversioned workers get new workflows
    ramping: str
    ramping_percent: float
    versions: list[VersionState]

    def lines(self) -> list[str]:
        ramp = f"{self.ramping} at {self.ramping_percent:g}%" if self.ramping else "none"
        head = [f"deployment {self.name}: current {self.current or '(unversioned)'}, ramping {ramp}"]
        return head + [f"  {v.build_id:<24} {v.status}" for v in self.versions]


def _not_found(exc: RPCError) -> bool:
    return exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION) or "not found" in exc.message


async def describe_deployment(client: Client, name: str) -> DeploymentState:
    """The deployment's routing and every version's status (``draining``: pinned workflows still open)."""
    try:
        response = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name)
        )
    except RPCError as exc:
        if _not_found(exc):
            raise DeploymentNotReady(f"no Worker Deployment {name!r}: start a worker of it first") from None
        raise
    info = response.worker_deployment_info
    routing = info.routing_config
    return DeploymentState(
        name=name,
        current=routing.current_deployment_version.build_id,
        ramping=routing.ramping_deployment_version.build_id,
        ramping_percent=routing.ramping_version_percentage,
        versions=[
            VersionState(v.deployment_version.build_id, _STATUS.get(v.status, "unknown"))
            for v in sorted(info.version_summaries, key=lambda v: v.create_time.ToDatetime())
        ],
    )


def _interrupted(exc: RPCError) -> bool:
    """The server cancelled the routing change ("operation was canceled": seen on a loaded machine once each
    version polled two task queues, the erasure's and the physical job's): asking again is safe, a routing
    change is idempotent."""
    return exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)


async def _until_known(call: Callable[[], Awaitable[T]], name: str, build_id: str, wait_seconds: float) -> T:
    """``call()``, retried while the server does not know the version yet (its workers just started), or
    cancelled the change before it propagated (asked again: setting a routing is idempotent)."""
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        try:
            return await call()
        except RPCError as exc:
            if _interrupted(exc) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.5)
                continue
            if not _not_found(exc):
                raise
            if asyncio.get_running_loop().time() >= deadline:
                raise DeploymentNotReady(
                    f"version {build_id!r} of Worker Deployment {name!r} is not known to Temporal: start its "
                    f"workers first (the server said: {exc.message[:200]})"
                ) from None
            await asyncio.sleep(0.25)


async def set_current(client: Client, name: str, build_id: str, *, wait_seconds: float = 30.0) -> str:
    """Make ``build_id`` the current version: new workflows (and auto-upgrading ones) start there; pinned
    workflows stay on theirs. The previous current build id ("" for unversioned)."""

    async def call() -> SetWorkerDeploymentCurrentVersionResponse:
        return await client.workflow_service.set_worker_deployment_current_version(
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=client.namespace, deployment_name=name, build_id=build_id, identity="erasure deployment"
            )
        )

    response = await _until_known(call, name, build_id, wait_seconds)
    return response.previous_deployment_version.build_id


async def set_ramping(client: Client, name: str, build_id: str, percent: float, *, wait_seconds: float = 30.0) -> None:
    """Send ``percent`` of new workflows to ``build_id`` (the rest to the current version); ``build_id`` ""
    removes the ramp."""

    async def call() -> SetWorkerDeploymentRampingVersionResponse:
        return await client.workflow_service.set_worker_deployment_ramping_version(
            SetWorkerDeploymentRampingVersionRequest(
                namespace=client.namespace,
                deployment_name=name,
                build_id=build_id,
                percentage=percent if build_id else 0.0,
                identity="erasure deployment",
            )
        )

    await _until_known(call, name, build_id, wait_seconds)

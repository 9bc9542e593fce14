"""What the CLI (and later an API) does: file requests, holds, status, receipts. No printing here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError

from activities.reconcile import reconcile
from stores.books.approvals import actor_ref
from stores.books.request_filing import Filing
from stores.books.requests import ErasureRequestRow
from stores.infra.errors import InvalidIdentifier
from stores.infra.tracing import span
from stores.operations.presence import ids_holding_data
from stores.platform import Platform
from stores.privacy.identity import decode_hex_id, normalisation_variants, subject_key, validate_app_name, validate_id
from workers.errors import ErasureCliError
from workers.settings import Settings
from workflows.contracts.erasure import (
    ERASURE_WORKFLOW,
    FENCE_CHECK,
    ApprovalPolicy,
    ErasureInput,
    Progress,
    VerifyInput,
    workflow_id,
)
from workflows.contracts.search_attributes import ERASURE_DUE_DATE, ERASURE_STAGE, ERASURE_STATUS


class RequestRefused(ErasureCliError):
    """The request can never be valid; nothing was stored or started."""


@dataclass(frozen=True)
class Filed:
    request_id: str
    subject_key: str
    workflow_id: str
    attached: bool  # True: a request for this subject was already running; this one joined it
    due_at: datetime


def new_request_id() -> str:
    return "er_" + uuid.uuid4().hex[:20]


def parse_due(value: str | None, received: datetime, settings: Settings) -> datetime:
    if not value:
        return received + timedelta(days=settings.due_days_int)
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise RequestRefused("--due must be a date like 2026-12-31") from None
    due = datetime.combine(day, time(23, 59, 59), tzinfo=UTC)
    if due < received:
        raise RequestRefused("--due is in the past")
    return due


def exact_user_id(user: str | None, user_hex: str | None) -> str:
    """The one identity validator of every intake path (the CLI, the console's form and API, a bulk CSV, a
    forwarded request): the user id as typed (``--user``, ``user_id``) or from its UTF-8 bytes in hex
    (``--user-hex``, ``user_id_hex``), exactly. Typed, it may not start or end with whitespace: a form, a
    shell or a CSV cell adds such spaces by mistake, and identity is exact, so the request would erase a
    subject who does not exist while the real one keeps every row. An id that truly has them is given in
    hex, which says so on purpose."""
    user_hex = user_hex or None  # an empty form field is a field not filled in
    if user == "" and user_hex is not None:
        user = None
    if (user is None) == (user_hex is None):
        raise RequestRefused("give the user id with exactly one of --user and --user-hex (user_id, user_id_hex)")
    if user_hex is not None:
        try:
            return decode_hex_id(user_hex)
        except InvalidIdentifier as exc:
            raise RequestRefused(str(exc)) from None
    assert user is not None
    if user != user.strip():
        raise RequestRefused(
            "the user id starts or ends with whitespace, which forms and CSV cells add by mistake; if the stored "
            "id truly has it, give the id in hex (--user-hex, user_id_hex)"
        )
    return user


def other_spellings_with_data(platform: Platform, app_name: str, user_id: str) -> list[str]:
    """Trimmed or Unicode-normalised spellings of ``user_id`` that hold data of their own in the app.

    Identity is exact, so they are other subjects: an erasure of one never touches the others. The CLI
    warns about them so that staff can file each spelling that belongs to the same person."""
    return ids_holding_data(platform, app_name, normalisation_variants(user_id))


def validate_request(platform: Platform, app_name: str, user_id: str) -> str:
    """The subject key, or ``RequestRefused`` with a clear, PII-free reason."""
    try:
        validate_app_name(app_name)
        validate_id(user_id)
    except InvalidIdentifier as exc:
        raise RequestRefused(str(exc)) from None
    if not platform.requests.app_known(app_name):
        raise RequestRefused(f"unknown app {app_name!r}: the platform holds no data for it")
    return subject_key(platform.config.subject_secret, app_name, user_id)


async def file_request(
    client: Client,
    platform: Platform,
    settings: Settings,
    *,
    app_name: str,
    user_id: str,
    reason: str | None = None,
    requested_by: str | None = None,
    due: str | None = None,
    ingestion_delay_seconds: int | None = None,
    approval: ApprovalPolicy | None = None,
    contact: str | None = None,
    filed_with: Filing | None = None,
) -> Filed:
    # the root of the request's trace from the CLI, a child of the HTTP request's in the console; the client's
    # tracing interceptor carries it into the workflow (workers/tracing.py)
    with span("file erasure request", of="erasure.service") as current:
        received = datetime.now(UTC)
        due_at = parse_due(due, received, settings)
        sk = validate_request(platform, app_name, user_id)
        # a subject's open request whose workflow is closed or gone is failed first: attaching to it would
        # strand this filing too (issue 40 item 4)
        await reconcile_stranded(client, platform, sk)
        request_id, created = platform.requests.create(
            request_id=new_request_id(),
            subject_key=sk,
            app_name=app_name,
            user_id=user_id,
            received_at=received,
            due_at=due_at,
            requested_by=requested_by,
            reason=reason,
        )
        if created:  # the plan is not decided here: the worker's ``begin_request`` decides and records it
            if contact:
                platform.requests.set_contact(request_id, contact)
            platform.requests.set_filing(request_id, filed_with or Filing("cli"))
            if approval is None:  # the CLI's single-person path: the operator holds the worker's own secrets
                by = actor_ref(platform.config.subject_secret, requested_by or "cli")
                platform.approvals.record(
                    request_id=request_id,
                    subject_key=sk,
                    kind="erasure",
                    path="single_person",
                    decision="approved",
                    requested_by=by,
                    decided_by=by,
                )
        row = platform.requests.get(request_id)
        delay = settings.ingestion_delay if ingestion_delay_seconds is None else ingestion_delay_seconds
        current.set_attribute("erasure.request_id", request_id)
        current.set_attribute("erasure.attached", not created)
        await client.start_workflow(
            ERASURE_WORKFLOW,
            ErasureInput(
                request_id=request_id,
                subject_key=sk,
                app_name=app_name,
                received_at=row.received_at.isoformat(),
                due_at=row.due_at.isoformat(),
                ingestion_delay_seconds=delay,
                approval=approval,
                notify=approval is not None,
            ),
            id=workflow_id(request_id),
            task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(ERASURE_STATUS, "received"),
                    SearchAttributePair(ERASURE_STAGE, "received"),
                    SearchAttributePair(ERASURE_DUE_DATE, row.due_at),
                ]
            ),
            memo={"request_id": request_id, "app": app_name},
            # what Temporal UI shows for the run (PII-free: the subject key, the app and the due date)
            static_summary=f"erasure of {sk[:15]}… in {app_name}, due {row.due_at:%Y-%m-%d}",
            static_details=f"request {request_id}; "
            + ("waits for approval (four eyes)" if approval else "filed by the CLI"),
        )
        return Filed(request_id, sk, workflow_id(request_id), attached=not created, due_at=row.due_at)


async def reconcile_stranded(client: Client, platform: Platform, subject: str) -> list[str]:
    """Fail ``subject``'s open request when its workflow is closed or missing (``activities.reconcile``);
    the ids of the requests failed."""
    return (await reconcile(client, platform, subject_key=subject, limit=5)).failed


def reverify_input(row: ErasureRequestRow, phase: str = "final") -> VerifyInput:
    """The verifier's input for a filed request: the checks of the stores its plan named (and the fence)."""
    stores = row.record.stores
    checks = [*stores, FENCE_CHECK] if stores is not None else []
    return VerifyInput(row.request_id, row.subject_key, row.app_name, phase, checks=checks, together=True)


async def progress(client: Client, request_id: str) -> Progress | None:
    try:
        result = await client.get_workflow_handle(workflow_id(request_id)).query("progress", result_type=Progress)
    except RPCError:
        return None
    return result if isinstance(result, Progress) else None


class HoldNotDelivered(ErasureCliError):
    """A hold change is recorded in the hold store, but the running request could not be told about it.

    The saga reads the hold store before every destructive step, so a placed hold is honoured anyway; a
    release is noticed at the next periodic re-check (at most ``HOLD_RECHECK_MAX`` later) or a later signal.
    """

    def __init__(self, request_id: str, why: str) -> None:
        super().__init__(f"request {request_id} was not notified ({why})")
        self.request_id = request_id
        self.why = why


async def signal_hold_change(client: Client, platform: Platform, subject: str) -> str | None:
    """Tell the subject's running request (if any) that its hold changed; its request id, or ``None``.

    Raises ``HoldNotDelivered`` when the signal could not be delivered: never reports a silent success.
    """
    active = platform.requests.active_for(subject)
    if active is None:
        return None
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id(active.request_id))
    try:
        await handle.signal("hold_changed")
    except RPCError as exc:
        raise HoldNotDelivered(active.request_id, f"Temporal refused the signal: {exc.status.name}") from None
    return active.request_id


def days_left(row: ErasureRequestRow, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    return (row.due_at - now).days


def ui_link(settings: Settings, request_id: str) -> str:
    return f"{settings.ui_url}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id(request_id)}"


async def worker_polling(client: Client, settings: Settings, task_queue: str | None = None) -> bool:
    """Whether a worker polls ``task_queue`` (default: the settings' task queue) for activities (one is
    running)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=settings.temporal_namespace,
            task_queue=TaskQueue(name=task_queue or settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    return len(resp.pollers) > 0


async def running_stages(client: Client, limit: int = 2000) -> dict[str, str]:
    """request id -> stage (``ErasureStage``) of every running erasure: one visibility listing, not a query
    per workflow."""
    out: dict[str, str] = {}
    query = 'WorkflowType = "ErasureWorkflow" AND ExecutionStatus = "Running"'
    async for execution in client.list_workflows(query, limit=limit):
        stage = execution.typed_search_attributes.get(ERASURE_STAGE)
        if stage and execution.id.startswith("erasure-"):
            out[execution.id.removeprefix("erasure-")] = stage
    return out

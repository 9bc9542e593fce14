"""The PII-free dataclasses workflows and activities exchange, and the names they call each other by.

Nothing here may hold a raw user id or any content: only request ids, subject keys, app names, step
names, counts, times and check results. Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TASK_QUEUE_DEFAULT = "erasure"
ERASURE_WORKFLOW = "ErasureWorkflow"
VERIFIER_WORKFLOW = "VerifierWorkflow"
SWEEP_WORKFLOW = "LateWriterSweepWorkflow"

#: The saga's own progress steps, what it shows until ``begin_request`` has decided the plan (whose stores
#: then go between the fence and ``verify_main``: ``workflows.erasure.plan``); ``wait`` is the durable
#: ingestion-delay timer.
SAGA_STEPS = ("fence", "verify_main", "wait", "sweep", "lift_fence")
STEP_STATES = ("pending", "running", "done", "failed", "skipped")


def workflow_id(request_id: str) -> str:
    return f"erasure-{request_id}"


class Activities:
    """Activity names: workflows call activities by name, never by importing their implementation."""

    BEGIN = "begin_request"
    HOLD_ACTIVE = "hold_active"
    SET_STATE = "set_request_state"
    LIFT_FENCE = "lift_fence"
    FINISH = "finish_request"
    RECEIPT = "issue_receipt"
    CHECK = "run_check"  # the verifier's one check per activity (``VerifyInput.together`` unset)
    CHECKS = "run_checks"  # every check of a verification in one activity (``VerifyInput.together``)
    SWEEP_PAGE = "sweep_page"
    SWEEP_SUBJECT = "sweep_subject"
    # the saga's destructive steps: each reads the hold store itself, right before its work, and does nothing
    # while a hold exists (``StepResult.held``); a plan's store is named in the input
    FENCE_UNLESS_HELD = "fence_user_unless_held"
    ERASE_STORE_UNLESS_HELD = "erase_store_unless_held"
    SWEEP_STORES_UNLESS_HELD = "sweep_stores_unless_held"
    # approval (the compliance console): the due date moved once, with the request store told
    SET_DUE = "set_request_due"
    # notifications (console-filed requests): a signed webhook per state change, the subject's e-mail
    WEBHOOK = "send_webhook"
    NOTIFY_SUBJECT = "notify_subject"


def store_activity_id(store: str) -> str:
    """The activity id of a plan's ``erase_store`` step for one store (one per run of the saga)."""
    return f"erase:{store}"


#: the activity ids of the saga's fence and second sweep: the labels history readers, logs and metrics know
#: them by (the names their activities had before each read the hold store itself)
FENCE_STEP_ID = "fence_user"
SWEEP_STEP_ID = "sweep_stores"

#: activities whose id names the step: a plan's stores (``erase:<store>``), the fence and the sweep
_LABELLED_BY_ID = frozenset(
    {Activities.ERASE_STORE_UNLESS_HELD, Activities.FENCE_UNLESS_HELD, Activities.SWEEP_STORES_UNLESS_HELD}
)


def activity_label(activity_type: str, activity_id: str) -> str:
    """How history readers, logs and metrics name an activity: ``erase:<store>`` for a plan's store steps,
    ``fence_user`` and ``sweep_stores`` for the fence and the sweep, else its type."""
    return activity_id if activity_type in _LABELLED_BY_ID else activity_type


#: The verifier's check of the fence (session tombstones): not a store, always run after the stores' checks.
FENCE_CHECK = "fence"


@dataclass(frozen=True)
class PlanStep:
    """One store of the request's plan, as the registry ordered it (``stores.adapters.registry.PlannedStep``,
    the registry's own form: the stores layer cannot import this contract, ``activities.request.worker_plan``
    turns one into the other). Recorded in the saga's input and ``begin_request``'s result: fields are only
    ever added, with defaults."""

    name: str  # the adapter's name: its step, its check and its key in the receipt
    after: list[str] = field(default_factory=list)  # steps it waits for (resolved: no "*")
    batched: bool = True  # heartbeats and resumes from its cursor
    #: physical clean-up: runs once the second sweep is done (requests filed before: with the other stores)
    after_sweep: bool = False


@dataclass(frozen=True)
class ErasureInput:
    request_id: str
    subject_key: str
    app_name: str
    received_at: str  # ISO 8601, UTC
    due_at: str
    ingestion_delay_seconds: int = 3600
    #: set when a run continues as new (while on hold): what the earlier runs did, so this one resumes there
    resume: SagaProgress | None = None
    #: the stores to erase, in order: ``None`` when filed (``begin_request`` decides the plan in the worker);
    #: a run continued as new carries the plan its first run adopted. Histories recorded before the plan was
    #: decided once hold the plan the filing process chose (the worker's replaced it when the saga began).
    plan: list[PlanStep] | None = None
    #: filed through the console: wait for a second person's approval first (``None``: start at once)
    approval: ApprovalPolicy | None = None
    #: filed through the console: signed webhooks on every state change, and the e-mail to the subject
    notify: bool = False


@dataclass(frozen=True)
class ApprovalPolicy:
    """Four eyes: the saga waits in ``pending_approval`` until someone other than ``requester`` approves.

    ``requester`` is a keyed digest of the requester's identity (``console.identity.actor_ref``): no staff
    name or e-mail in the history. After approval it waits ``waiting_seconds`` more, still cancellable."""

    requester: str
    waiting_seconds: int = 0


@dataclass(frozen=True)
class Decision:
    """An approver's or requester's decision on a pending request; ``actor`` is a keyed digest."""

    actor: str


@dataclass(frozen=True)
class DueExtension:
    """Move the due date once (GDPR Art. 12(3): by up to two further months); the reason goes to the audit
    log, never into the history."""

    actor: str
    days: int


@dataclass(frozen=True)
class DueChange:
    request_id: str
    due_at: str  # ISO 8601, UTC


@dataclass(frozen=True)
class StateEvent:
    """What a webhook says of a state change (PII-free: ids, the subject key, states, times)."""

    request_id: str
    subject_key: str
    state: str
    stage: str
    at: str
    due_at: str


@dataclass(frozen=True)
class SubjectNotice:
    request_id: str
    status: str
    receipt_sha256: str


@dataclass(frozen=True)
class StepInput:
    request_id: str
    subject_key: str
    app_name: str


@dataclass(frozen=True)
class StoreStepInput:
    request_id: str
    subject_key: str
    app_name: str
    store: str  # an adapter name from the request's plan
    #: where a run of the step that a hold stopped between two batches left off (its ``StepResult.resume``):
    #: the adapter resumes from it as from a heartbeat, so the step's counts are the whole user's
    cursor: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepStoresInput:
    request_id: str
    subject_key: str
    app_name: str
    stores: list[str] = field(default_factory=list)  # the plan's adapter names, in order


@dataclass(frozen=True)
class StepResult:
    step: str
    counts: dict[str, int] = field(default_factory=dict)
    #: the step read the hold store right before its work (or between two of its batches), found a hold and
    #: stopped; the saga waits for the release and runs the step again (from ``resume``)
    held: bool = False
    #: a batched step stopped by a hold between two batches: its last heartbeat's cursor (PII-free counts)
    resume: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BeginResult:
    started_at: str
    sessions: int = 0
    canaries: int = 0
    #: the plan the worker decided from its own registry and recorded, which the saga acts on (``None`` only in
    #: histories of runs that began before plan-from-worker-v1: they act on the plan they were filed with)
    plan: list[PlanStep] | None = None


@dataclass(frozen=True)
class HoldStatus:
    on_hold: bool


@dataclass(frozen=True)
class StateChange:
    request_id: str
    state: str
    at: str = ""


@dataclass(frozen=True)
class StepProgress:
    name: str
    state: str = "pending"
    counts: dict[str, int] = field(default_factory=dict)
    attempts: int = 0


@dataclass(frozen=True)
class Progress:
    request_id: str
    status: str
    stage: str
    due_at: str
    steps: list[StepProgress] = field(default_factory=list)
    on_hold: bool = False
    approval: str = ""  # "", pending, approved, denied or cancelled
    due_extended: bool = False


@dataclass(frozen=True)
class VerifyInput:
    request_id: str
    subject_key: str
    app_name: str
    phase: str  # "main" (after keys) or "final" (after the second sweep)
    #: the checks to run: the plan's stores and the fence (empty: the built-in checks of requests filed
    #: before plans existed)
    checks: list[str] = field(default_factory=list)
    #: run every check in one ``run_checks`` activity (each with its own queries and result, a heartbeat
    #: after each) instead of one ``run_check`` activity per check; set by the saga since ``fewer-actions-v1``
    together: bool = False


@dataclass(frozen=True)
class CheckInput:
    request_id: str
    subject_key: str
    app_name: str
    check: str
    phase: str


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    counts: dict[str, int] = field(default_factory=dict)
    detail: str = ""  # PII-free explanation, e.g. "2 object versions remain"


@dataclass(frozen=True)
class ChecksInput:
    request_id: str
    subject_key: str
    app_name: str
    checks: list[str]  # in order; the results come back in the same order
    phase: str


@dataclass(frozen=True)
class ChecksResult:
    checks: list[CheckResult] = field(default_factory=list)


@dataclass(frozen=True)
class VerifyResult:
    phase: str
    passed: bool
    checks: list[CheckResult] = field(default_factory=list)


@dataclass(frozen=True)
class FinishInput:
    request_id: str
    subject_key: str
    app_name: str
    status: str  # completed | verification_failed | failed
    completed_at: str
    failed_step: str = ""  # status failed: the step that failed
    fence: str = ""  # status failed: "lifted", "kept" (lifting failed too) or "not_placed"


@dataclass(frozen=True)
class ReceiptInput:
    request_id: str
    subject_key: str
    app_name: str
    status: str
    completed_at: str
    steps: list[StepProgress] = field(default_factory=list)
    verifications: list[VerifyResult] = field(default_factory=list)


@dataclass(frozen=True)
class ReceiptRef:
    request_id: str
    sha256: str
    s3_key: str


@dataclass(frozen=True)
class ErasureResult:
    request_id: str
    subject_key: str
    status: str
    steps: list[StepProgress] = field(default_factory=list)
    verified: bool = False
    receipt_sha256: str = ""


@dataclass(frozen=True)
class SagaProgress:
    """What a saga run hands the next when it continues as new (PII-free: steps, counts, check results)."""

    steps: list[StepProgress] = field(default_factory=list)
    verifications: list[VerifyResult] = field(default_factory=list)
    on_hold: bool = False
    hold_rechecks: int = 0  # re-checks so far in the current hold (the back-off continues from there)
    runs: int = 1  # runs so far, this one excluded


# ----- scheduled sweeps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepInput:
    lookback_hours: int = 24 * 30
    page_size: int = 200
    after_request_id: str = ""
    findings_so_far: int = 0
    subjects_so_far: int = 0
    pages_per_run: int = 10
    failed_so_far: int = 0  # subjects whose sweep failed, in earlier runs of this chain
    malformed_so_far: int = 0


@dataclass(frozen=True)
class SweepPageInput:
    lookback_hours: int
    after_request_id: str
    page_size: int


@dataclass(frozen=True)
class SweepPage:
    request_ids: list[str] = field(default_factory=list)
    last_request_id: str = ""


@dataclass(frozen=True)
class SweepSubjectInput:
    request_id: str


@dataclass(frozen=True)
class SweepFinding:
    request_id: str
    subject_key: str
    counts: dict[str, int] = field(default_factory=dict)
    #: others' malformed log lines seen and kept (reported, not a finding)
    malformed_lines: int = 0
    #: a legal hold on the subject: nothing was swept (the next run looks again)
    held: bool = False
    #: what the stores saw and kept, by their own count names (a held owner's derived rows, a held writer's
    #: log lines, others' malformed lines): never findings
    reported: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class SweepResult:
    subjects: int = 0
    findings: int = 0
    subjects_with_findings: list[str] = field(default_factory=list)
    #: subjects whose sweep failed after its retries (the run went on to the next ones), and the request ids
    #: (PII-free) of this run's first hundred of them
    failed: int = 0
    failed_requests: list[str] = field(default_factory=list)
    malformed_lines: int = 0  # others' malformed log lines seen and kept, over every subject

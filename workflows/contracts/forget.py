"""The PII-free dataclasses of item forgetting's workflow, and its activity declarations.

A forget names the user's items by id (random UUIDs) and its strength; everything personal (the raw user
id, spans, ``user:`` state keys, a session id) stays sealed in the forget request store, where the
activities read it. Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import activity

from workflows.contracts.declarations import declared_only

FORGET_WORKFLOW = "ForgetWorkflow"
#: the workflow's steps, in order
FORGET_STEPS = ("apply", "verify", "reingest_verify", "receipt")


def forget_workflow_id(request_id: str) -> str:
    return f"forget-{request_id}"


class ForgetActivityNames:
    BEGIN = "forget_begin"
    APPLY = "forget_apply"
    VERIFY = "forget_verify"
    RECEIPT = "forget_receipt"
    FINISH = "forget_finish"


@dataclass(frozen=True)
class ForgetInput:
    request_id: str
    subject_key: str
    app_name: str
    strength: str  # suppress | forget | erase_session
    memory_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ForgetStep:
    request_id: str
    subject_key: str
    app_name: str
    strength: str


@dataclass(frozen=True)
class ForgetApplied:
    counts: dict[str, int] = field(default_factory=dict)
    derived_ids: list[str] = field(default_factory=list)
    #: every registered store of the worker, by name: what this forget did there (counts only)
    stores: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ForgetVerifyInput:
    request_id: str
    subject_key: str
    app_name: str
    strength: str
    reingest: bool = False  # re-ingest every one of the user's sessions first, then probe again


@dataclass(frozen=True)
class ForgetCheck:
    check: str  # recall | store | state | session | logs | artifacts | reingest | a store with forget_items
    passed: bool
    counts: dict[str, int] = field(default_factory=dict)
    detail: str = ""


@dataclass(frozen=True)
class ForgetVerification:
    phase: str  # after_forget | after_reingest
    passed: bool
    checks: list[ForgetCheck] = field(default_factory=list)


@dataclass(frozen=True)
class ForgetReceiptInput:
    request_id: str
    subject_key: str
    app_name: str
    strength: str
    status: str
    completed_at: str
    counts: dict[str, int] = field(default_factory=dict)
    derived_ids: list[str] = field(default_factory=list)
    verifications: list[ForgetVerification] = field(default_factory=list)
    stores: dict[str, dict[str, int]] = field(default_factory=dict)  # per store, what the forget did there


@dataclass(frozen=True)
class ForgetReceiptRef:
    request_id: str
    sha256: str


@dataclass(frozen=True)
class ForgetFinish:
    request_id: str
    status: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ForgetStepProgress:
    name: str
    state: str = "pending"  # pending | running | done | failed
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ForgetProgress:
    request_id: str
    subject_key: str
    strength: str
    status: str
    steps: list[ForgetStepProgress] = field(default_factory=list)


@dataclass(frozen=True)
class ForgetResult:
    request_id: str
    status: str  # completed | verification_failed
    counts: dict[str, int] = field(default_factory=dict)
    verifications: list[ForgetVerification] = field(default_factory=list)
    receipt_sha256: str = ""


@activity.defn(name=ForgetActivityNames.BEGIN)
def forget_begin(inp: ForgetStep) -> None:
    raise declared_only()


@activity.defn(name=ForgetActivityNames.APPLY)
def forget_apply(inp: ForgetStep) -> ForgetApplied:
    raise declared_only()


@activity.defn(name=ForgetActivityNames.VERIFY)
def forget_verify(inp: ForgetVerifyInput) -> ForgetVerification:
    raise declared_only()


@activity.defn(name=ForgetActivityNames.RECEIPT)
def forget_receipt(inp: ForgetReceiptInput) -> ForgetReceiptRef:
    raise declared_only()


@activity.defn(name=ForgetActivityNames.FINISH)
def forget_finish(inp: ForgetFinish) -> None:
    raise declared_only()

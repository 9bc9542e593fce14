"""The approval gate's rules and the approval signature, as pure logic (the real stack: test_front_door)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.approval_gate import APPROVED, BOUND, PLATFORM, ApprovalGate, own_workflow
from stores.books.approvals import Approval, ApprovalSigner
from stores.infra.errors import NotApproved
from workers import worker
from workflows.contracts import error_types

SECRET = b"s" * 32


def _registered_activity_names() -> set[str]:
    """Every activity name the worker registers, read from the activity classes' definitions."""
    names: set[str] = set()
    for value in vars(worker).values():
        if isinstance(value, type) and value.__name__.endswith("Activities"):
            for member in vars(value).values():
                defn = getattr(member, "__temporal_activity_definition", None)
                if defn is not None:
                    names.add(defn.name)
    return names


def test_every_activity_the_worker_registers_is_classified_once() -> None:
    names = _registered_activity_names()
    assert len(names) > 25  # the module scan found the activity classes (29 activities)
    classified = [*APPROVED, *BOUND, *PLATFORM]
    assert len(classified) == len(set(classified)), "an activity is in two classes"
    assert names - set(classified) == set(), "a new activity: classify it in activities/approval_gate.py"


@dataclass
class FakeApprovals:
    """Records what the gate asked; refuses unless the request id is in ``approved``."""

    approved: set[str]

    def require(self, request_id: str, subject_key: str | None = None, kind: str | None = None) -> Approval:
        if request_id not in self.approved:
            raise NotApproved("no approval is recorded for this request: nothing may be changed")
        return Approval(request_id, subject_key or "", kind or "", "single_person", "approved", "a", "a", _now())


def _now() -> datetime:
    return datetime(2026, 12, 3, tzinfo=UTC)


@dataclass(frozen=True)
class Arg:
    request_id: str
    subject_key: str = "sk_x"


def _gate(*approved: str) -> ApprovalGate:
    return ApprovalGate(FakeApprovals(set(approved)))  # type: ignore[arg-type]


def _refused(gate: ApprovalGate, activity: str, workflow_id: str | None, arg: Any) -> str:
    with pytest.raises(ApplicationError) as refused:
        gate.check(activity, workflow_id, arg)
    assert refused.value.type == error_types.NOT_APPROVED
    assert refused.value.non_retryable
    return str(refused.value)


def test_a_destructive_step_needs_an_approval_and_its_own_workflow() -> None:
    gate = _gate("er_1")
    gate.check("fence_user_unless_held", "erasure-er_1", Arg("er_1"))  # approved, its own workflow: runs
    assert "no approval" in _refused(_gate(), "fence_user_unless_held", "erasure-er_1", Arg("er_1"))
    assert "not the request's own" in _refused(gate, "erase_store_unless_held", "erasure-forged", Arg("er_1"))
    assert "not the request's own" in _refused(gate, "begin_request", None, Arg("er_1"))
    assert "names no request" in _refused(gate, "forget_apply", "forget-", Arg(""))


def test_reads_and_pre_decision_states_need_only_the_requests_own_workflow() -> None:
    gate = _gate()  # nothing approved
    gate.check("set_request_state", "erasure-er_2", Arg("er_2"))
    gate.check("run_checks", "verify-er_2-main", Arg("er_2"))
    gate.check("run_checks", "reverify-er_2-1a2b3c4d", Arg("er_2"))
    assert "not the request's own" in _refused(gate, "set_request_state", "erasure-er_3", Arg("er_2"))


def test_platform_jobs_pass_and_an_unknown_activity_is_refused() -> None:
    gate = _gate()
    gate.check("sweep_page", "late-writer-sweep", object())
    assert "not classified" in _refused(gate, "delete_everything", "erasure-er_1", Arg("er_1"))


def test_own_workflow_is_exact_not_a_prefix_of_another_request() -> None:
    assert own_workflow("erasure-er_1", "er_1")
    assert not own_workflow("erasure-er_12", "er_1")
    assert not own_workflow("verify-er_12-main", "er_1")
    assert own_workflow("forget-fr_9", "fr_9")
    assert not own_workflow("forget-fr_9", "")


def test_the_signature_binds_every_field() -> None:
    signer = ApprovalSigner(SECRET)
    approval = Approval("er_1", "sk_a", "erasure", "four_eyes", "approved", "act_a", "act_b", _now())
    tag = signer.sign(approval)
    assert signer.verifies(approval, tag)
    for changed in (
        replace(approval, request_id="er_2"),
        replace(approval, subject_key="sk_b"),
        replace(approval, kind="forget"),
        replace(approval, path="single_person"),
        replace(approval, decision="denied"),
        replace(approval, requested_by="act_b"),
        replace(approval, decided_by="act_a"),
        replace(approval, decided_at=datetime(2026, 12, 4, tzinfo=UTC)),
    ):
        assert not signer.verifies(changed, tag), changed
    assert not ApprovalSigner(b"t" * 32).verifies(approval, tag)  # another secret: another tag

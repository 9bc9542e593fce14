"""What ``erasure receipt show`` and the console say of a request's physical clean-up (issue 30): from the
physical books' row, the signed attestation and the receipt's own ``physical`` entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stores.books.physical_pending import PhysicalStatus
from verifier.receipts.attestation import PhysicalView, describe_physical, link_problem
from verifier.receipts.signing import digest

DUE = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
RECEIPT = {"request_id": "er_1", "physical": {"state": "pending", "due_by": DUE.isoformat()}}


def test_pending_says_by_when_and_whether_the_window_is_missed() -> None:
    status = PhysicalStatus("pending", DUE, None, None)
    view = describe_physical(status, None, RECEIPT, now=DUE - timedelta(hours=1))
    assert view == PhysicalView("pending", DUE.isoformat())
    assert view.line() == "pending (due by 2026-12-07T01:00:00+00:00)"
    late = describe_physical(status, None, RECEIPT, now=DUE + timedelta(minutes=1))
    assert late.line() == "pending (due by 2026-12-07T01:00:00+00:00, OVERDUE)"


def test_done_says_when_by_which_run_and_whether_within_the_window() -> None:
    at = DUE - timedelta(hours=20)
    status = PhysicalStatus("done", DUE, at, "physical-cleanup-1")
    view = describe_physical(status, {"within_window": True}, RECEIPT)
    assert view.line() == f"done at {at.isoformat()} by run physical-cleanup-1 (within window yes)"
    assert describe_physical(status, {"within_window": False}, RECEIPT).line().endswith("(within window no)")
    # without the attestation's word, the books' times decide
    late = PhysicalStatus("done", DUE, DUE + timedelta(seconds=1), "physical-cleanup-2")
    assert describe_physical(late, None, RECEIPT).within_window is False


def test_a_request_the_books_never_held_says_what_its_receipt_says() -> None:
    assert describe_physical(None, None, {"physical": {"state": "in_saga"}}).line() == "in saga"
    assert describe_physical(None, None, {"physical": {"state": "not_needed"}}).line() == "not needed"
    assert describe_physical(None, None, RECEIPT).state == "pending"  # filed, books restored without it
    older = describe_physical(None, None, {"request_id": "er_0"})  # a receipt from before the physical job
    assert older.state == "unrecorded"
    assert "predates the physical job" in older.line()
    assert describe_physical(None, None, None).state == "unrecorded"


def test_an_attestation_is_linked_to_one_receipt_by_request_id_and_hash() -> None:
    receipt = {"request_id": "er_1", "status": "completed"}
    attestation = {"request_id": "er_1", "receipt_sha256": digest({"receipt": receipt})}
    assert link_problem(attestation, receipt) == ""
    assert "receipt_sha256" in link_problem(attestation, {**receipt, "status": "failed"})
    assert "for request er_1, the receipt for er_2" in link_problem(attestation, {**receipt, "request_id": "er_2"})

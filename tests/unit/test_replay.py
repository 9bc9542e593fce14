"""Recorded histories replay cleanly against the current workflow code (determinism guard).

The histories in tests/histories/ were recorded from real erasures on the dev server (record a new one with
``ERASURE_RECORD_HISTORY=<name> pytest tests/integration/test_saga.py -k removes``, which writes
``erasure_<name>.json`` and ``verify_<name>.json``; ``tests/integration/test_holds.py`` with the same variable
writes ``erasure_hold_read_before_every_step_<name>.json`` and ``erasure_failed_lifts_fence_<name>.json``).
Their payloads are encrypted with the test suite's fixed payload key, so replaying also exercises the codec.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowReplayResult

from tests.stack_fixture import TEST_PAYLOAD_KEY
from verifier.workflow import VerifierWorkflow
from workers.codec import data_converter
from workflows.erasure import FEWER_ACTIONS, HOLDS_AND_LIFECYCLE, ErasureWorkflow
from workflows.forget import ForgetWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


@pytest.mark.parametrize(
    "name",
    [
        "erasure_completed.json",  # recorded before the hold-gate-on-signal-v1 patch: replays the old path
        "erasure_hold_gate_patch.json",  # recorded after it, before parallel-deletion-v1: one step after another
        "erasure_parallel_deletion.json",  # recorded after parallel-deletion-v1: stores side by side, no main pass
        "erasure_lifecycle.json",  # after holds-and-lifecycle-v1: hold read before every step, fence lifted last
        "erasure_hold_read_before_every_step.json",  # the same path, waiting on a hold until the release signal
        "erasure_failed_lifts_fence.json",  # the same path, a step failing for good: the fence lifted, then finish
        "erasure_plan.json",  # filed with a plan: erase_store per planned store (six, the response cache too)
        "erasure_plan_chroma.json",  # the same code path, recorded after the Chroma adapter was added (seven)
        "erasure_approved.json",  # filed for approval: extend_due and approve updates, a webhook per state
        # after fewer-actions-v1: each destructive step's activity reads the hold store itself, one upsert of
        # what changed per workflow task, the final verification's checks in one activity
        "erasure_fewer_actions.json",
        "erasure_hold_read_before_every_step_fewer_actions.json",  # two stores find a hold, wait, run again
        "erasure_failed_lifts_fence_fewer_actions.json",  # a store fails for good: the fence lifted, then finish
        "erasure_approved_fewer_actions.json",  # filed for approval: updates and webhooks, coalesced upserts
        "verify_completed.json",
        "verify_plan.json",  # one check per planned store, then the fence
        "verify_plan_chroma.json",  # seven store checks and the fence
        "verify_fewer_actions.json",  # nine store checks and the fence in one run_checks activity
        "forget_completed.json",  # item forgetting (issue 16): apply, verify, re-ingest and verify, receipt
    ],
)
async def test_recorded_history_replays(name: str) -> None:
    text = (HISTORIES / name).read_text()
    first = json.loads(text)["events"][0]
    workflow_id = first["workflowExecutionStartedEventAttributes"].get("workflowId", "recorded")
    replayer = Replayer(
        workflows=[ErasureWorkflow, VerifierWorkflow, ForgetWorkflow],
        data_converter=data_converter(bytes.fromhex(TEST_PAYLOAD_KEY)),
    )
    result = await replayer.replay_workflow(WorkflowHistory.from_json(workflow_id, text), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_a_changed_workflow_is_detected_as_nondeterministic() -> None:
    """The replay check can fail: a history whose activity sequence differs is refused."""
    history = json.loads((HISTORIES / "erasure_completed.json").read_text())
    for event in history["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs["activityType"]["name"] == "erase_artifacts":
            attrs["activityType"]["name"] = "erase_something_else"
    result = await _replay_edited(history, "tampered")
    assert result.replay_failure is not None


async def _replay_edited(history: dict[str, Any], label: str) -> WorkflowReplayResult:
    """Replay an edited copy of a recorded erasure history against the current code."""
    replayer = Replayer(workflows=[ErasureWorkflow], data_converter=data_converter(bytes.fromhex(TEST_PAYLOAD_KEY)))
    return await replayer.replay_workflow(
        WorkflowHistory.from_json(label, json.dumps(history)), raise_on_replay_failure=False
    )


def _plan_history() -> dict[str, Any]:
    return json.loads((HISTORIES / "erasure_plan.json").read_text())


async def test_a_plan_history_with_one_store_step_changed_is_refused() -> None:
    """The plan decides the commands: a recorded store step that names another store is nondeterminism."""
    history = _plan_history()
    changed = 0
    for event in history["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs.get("activityId") == "erase:logs":
            attrs["activityId"] = "erase:somewhere_else"
            changed += 1
    assert changed == 1
    result = await _replay_edited(history, "changed")
    assert result.replay_failure is not None


def _patch_ids(history: dict[str, Any]) -> list[str]:
    return [
        json.loads(base64.b64decode(payload["data"]))["id"]
        for event in history["events"]
        for payload in (event.get("markerRecordedEventAttributes") or {})
        .get("details", {})
        .get("patch-data", {})
        .get("payloads", [])
    ]


def test_a_plan_history_sets_no_patch_marker() -> None:
    """Requests filed with a plan before ``fewer-actions-v1`` took no ``workflow.patched`` branch (none of
    their code was old); since then they take exactly that one."""
    assert not any("markerRecordedEventAttributes" in e for e in _plan_history()["events"])
    lean = json.loads((HISTORIES / "erasure_fewer_actions.json").read_text())
    assert _patch_ids(lean) == [FEWER_ACTIONS]


@pytest.mark.parametrize(
    ("name", "patch"),
    [("erasure_lifecycle.json", HOLDS_AND_LIFECYCLE), ("erasure_fewer_actions.json", FEWER_ACTIONS)],
)
async def test_the_new_path_is_not_replayed_as_the_old_one(name: str, patch: str) -> None:
    """With its patch marker renamed, a history of a patched path is refused: the code then takes the old
    path, whose commands differ (so both sides of the patch are really exercised)."""
    history = json.loads((HISTORIES / name).read_text())
    renamed = 0
    for event in history["events"]:
        attrs = event.get("markerRecordedEventAttributes")
        for payload in (attrs or {}).get("details", {}).get("patch-data", {}).get("payloads", []):
            data = json.loads(base64.b64decode(payload["data"]))
            if data.get("id") == patch:
                payload["data"] = base64.b64encode(json.dumps({**data, "id": "some-other-patch"}).encode()).decode()
                renamed += 1
    assert renamed == 1
    result = await _replay_edited(history, "renamed")
    assert result.replay_failure is not None
    assert "Nondeterminism" in str(result.replay_failure) or "nondetermin" in str(result.replay_failure).lower()


async def test_a_lean_history_whose_store_reads_no_hold_is_refused() -> None:
    """The hold read is part of the recorded commands: a lean history whose store step ran the activity
    that reads no hold (``erase_store``) is not replayed by today's code."""
    history = json.loads((HISTORIES / "erasure_fewer_actions.json").read_text())
    changed = 0
    for event in history["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs.get("activityId") == "erase:memory":
            attrs["activityType"]["name"] = "erase_store"
            changed += 1
    assert changed == 1
    result = await _replay_edited(history, "unheld")
    assert result.replay_failure is not None

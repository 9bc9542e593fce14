"""Recorded histories replay cleanly against the current workflow code (determinism guard).

The histories in tests/histories/ were recorded from real erasures on the dev server (record a new one with
``ERASURE_RECORD_HISTORY=<name> pytest tests/integration/test_saga.py -k removes``, which writes
``erasure_<name>.json`` and ``verify_<name>.json``; ``tests/integration/test_holds.py`` with the same variable
writes ``erasure_hold_read_before_every_step_<name>.json`` and ``erasure_failed_lifts_fence_<name>.json``;
``tests/record_plan_history.py`` records the saga with stub activities).
Their payloads are encrypted with the test suite's fixed payload key, so replaying also exercises the codec.

Which erasure histories the code must replay: those a run still open could have, i.e. every history that took
the new side of the saga's deprecated patches (``workflows.erasure.patches``). Histories only older builds
could produce were retired with their code: requests filed without a plan (the built-in steps, patches
``hold-gate-on-signal-v1``, ``parallel-deletion-v1``, ``holds-and-lifecycle-v1``) and requests filed with a plan
before ``fewer-actions-v1`` (one ``hold_active`` read before each step, ``erase_store``); such runs finish
on the old version's workers, to which they are pinned. ``erasure_plan.json`` stays as the proof that today's
code refuses them.
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
from workflows.erasure import FEWER_ACTIONS, PHYSICAL_AFTER_SWEEP, PLAN_FROM_WORKER, ErasureWorkflow
from workflows.forget import ForgetWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


@pytest.mark.parametrize(
    "name",
    [
        # after fewer-actions-v1: each destructive step's activity reads the hold store itself, one upsert of
        # what changed per workflow task, the final verification's checks in one activity
        "erasure_fewer_actions.json",
        "erasure_hold_read_before_every_step_fewer_actions.json",  # two stores find a hold, wait, run again
        "erasure_failed_lifts_fence_fewer_actions.json",  # a store fails for good: the fence lifted, then finish
        "erasure_approved_fewer_actions.json",  # filed for approval: updates and webhooks, coalesced upserts
        # after plan-from-worker-v1 and physical-after-sweep-v1 too (stub activities): the worker's plan adopted,
        # the physical clean-up after the second sweep
        "erasure_plan_from_worker.json",
        "verify_completed.json",  # the verifier's built-in checks, one activity each (re-verifications)
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
    history = _lean_history()
    for event in history["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs["activityType"]["name"] == "fence_user_unless_held":
            attrs["activityType"]["name"] = "fence_something_else"
    result = await _replay_edited(history, "tampered")
    assert result.replay_failure is not None


async def _replay_edited(history: dict[str, Any], label: str) -> WorkflowReplayResult:
    """Replay an edited copy of a recorded erasure history against the current code."""
    replayer = Replayer(workflows=[ErasureWorkflow], data_converter=data_converter(bytes.fromhex(TEST_PAYLOAD_KEY)))
    return await replayer.replay_workflow(
        WorkflowHistory.from_json(label, json.dumps(history)), raise_on_replay_failure=False
    )


def _lean_history() -> dict[str, Any]:
    return json.loads((HISTORIES / "erasure_fewer_actions.json").read_text())


async def test_a_plan_history_with_one_store_step_changed_is_refused() -> None:
    """The plan decides the commands: a recorded store step that names another store is nondeterminism."""
    history = _lean_history()
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


def test_the_replayed_histories_took_the_new_side_of_each_deprecated_patch() -> None:
    """``deprecate_patch`` keeps replaying what took the new side: these histories hold the markers."""
    lean = json.loads((HISTORIES / "erasure_fewer_actions.json").read_text())
    assert _patch_ids(lean) == [FEWER_ACTIONS]
    today = json.loads((HISTORIES / "erasure_plan_from_worker.json").read_text())
    assert _patch_ids(today) == [FEWER_ACTIONS, PHYSICAL_AFTER_SWEEP, PLAN_FROM_WORKER]


async def test_a_history_of_a_retired_path_is_refused() -> None:
    """A request filed with a plan before ``fewer-actions-v1`` (no marker: ``hold_active`` before each step,
    then ``erase_store``) is not replayed by today's code: the old side of the patch is gone, so the
    deprecation ships only once the version that ran such requests is drained."""
    history = json.loads((HISTORIES / "erasure_plan.json").read_text())
    assert not _patch_ids(history)
    result = await _replay_edited(history, "retired")
    assert result.replay_failure is not None
    assert "nondetermin" in str(result.replay_failure).lower()


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

"""``LateWriterSweepWorkflow`` histories on both sides of ``subject-failures-v1`` replay on today's code.

Recorded on the dev server by ``tests/record_sweep_history.py`` with stub activities (three subjects over two
pages; default data converter):
``sweep_before_subject_failures.json`` by the code before the patch (a failing subject failed the run),
``sweep_subject_failures_patch.json`` after it, and ``sweep_subject_failure_counted.json`` after it with
the first subject's sweep failing non-retryably: the run counted it and went on to the others.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.sweep import SUBJECT_FAILURES_PATCH, LateWriterSweepWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


@pytest.mark.parametrize(
    "name",
    ["sweep_before_subject_failures.json", "sweep_subject_failures_patch.json", "sweep_subject_failure_counted.json"],
)
async def test_recorded_sweep_history_replays(name: str) -> None:
    text = (HISTORIES / name).read_text()
    result = await Replayer(workflows=[LateWriterSweepWorkflow]).replay_workflow(
        WorkflowHistory.from_json("recorded-sweep", text), raise_on_replay_failure=False
    )
    assert result.replay_failure is None, result.replay_failure


async def test_without_the_patch_the_failure_history_does_not_replay() -> None:
    """Negative control: rename the recorded patch, and the code takes the old path (a failed subject fails
    the run), which the history contradicts; so the guard is what keeps running sweeps replayable."""
    history = json.loads((HISTORIES / "sweep_subject_failure_counted.json").read_text())
    renamed = 0
    for event in history["events"]:
        attrs = event.get("markerRecordedEventAttributes")
        if attrs and attrs["markerName"] == "core_patch":
            payload = attrs["details"]["patch-data"]["payloads"][0]
            data = base64.b64decode(payload["data"]).replace(SUBJECT_FAILURES_PATCH.encode(), b"some-other-patch")
            payload["data"] = base64.b64encode(data).decode()
            renamed += 1
    assert renamed == 1
    result = await Replayer(workflows=[LateWriterSweepWorkflow]).replay_workflow(
        WorkflowHistory.from_json("tampered-sweep", json.dumps(history)), raise_on_replay_failure=False
    )
    assert result.replay_failure is not None

"""``run_checks``: every check of a verification in one activity, a few at once, each with its own result, a
heartbeat after each carrying the results so far; an error fails the attempt (nothing passes unchecked) and
the retry runs only the checks that had no result yet. Run in the SDK's ``ActivityEnvironment`` with the checks
replaced by a fake (the store reads themselves are covered by tests/unit/test_verifier_fail_closed.py)."""

from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import verification as checks
from activities.boundary import at_the_boundary
from activities.verification import VerifierActivities
from stores.adapters.interface import Beat
from stores.books.request_record import RequestRecord
from verifier.checks import CheckContext
from workflows.contracts.erasure import CheckResult, ChecksInput, ChecksResult

NAMES = ["sessions", "artifacts", "memory", "logs", "fence"]


class FakeChecks(VerifierActivities):
    """Each check answers from a table (``logs`` finds one line left); the ones in ``fail_once`` raise the
    first time they run, as a store that is briefly unreachable does."""

    def __init__(self, fail_once: set[str]) -> None:
        super().__init__(SimpleNamespace())  # type: ignore[arg-type]
        self.fail_once = set(fail_once)
        self.ran: list[str] = []

    def _request(self, request_id: str, key: str, app_name: str) -> Any:
        return checks._Request("user-1", RequestRecord(), None, missing_bound=False)

    def check(self, ctx: CheckContext, progress: Beat | None = None) -> CheckResult:
        name = ctx.inp.check
        self.ran.append(name)
        assert progress is not None
        progress({"phase": name})  # a check's own heartbeat keeps the results so far
        if name in self.fail_once:
            self.fail_once.discard(name)
            raise ConnectionError("store unreachable")
        left = 1 if name == "logs" else 0
        return CheckResult(name, not left, {"left": left}, f"{left} left")


def attempt(acts: FakeChecks, details: list[Any]) -> tuple[ChecksResult | None, list[Any]]:
    """One attempt of ``run_checks`` resumed from ``details``, as the worker runs it (through the step boundary,
    which turns an error into an ``ApplicationError``): its result (None if it failed) and heartbeats."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, activity_type="run_checks", heartbeat_details=details)
    beats: list[Any] = []
    env.on_heartbeat = lambda *d: beats.append(d[0])
    try:
        result = env.run(at_the_boundary(acts.run_checks), ChecksInput("r1", "sk_" + "a" * 40, "app", NAMES, "final"))
    except ApplicationError:
        return None, beats
    return result, beats


def test_every_check_has_its_own_result_in_order() -> None:
    acts = FakeChecks(set())
    result, beats = attempt(acts, [])
    assert result is not None
    assert [r.check for r in result.checks] == NAMES
    assert [r.passed for r in result.checks] == [True, True, True, False, True]  # logs: one line left
    assert sorted(acts.ran) == sorted(NAMES)
    assert [r["check"] for r in beats[-1][checks._DONE]] == NAMES  # in the verification's order


def test_an_error_fails_the_attempt_and_the_retry_runs_only_what_had_no_result() -> None:
    acts = FakeChecks({"memory"})
    first, beats = attempt(acts, [])
    assert first is None  # nothing passes unchecked: the attempt fails, the workflow's policy retries it
    assert sorted(acts.ran) == sorted(NAMES)  # the others still ran to the end
    carried = beats[-1]
    assert [r["check"] for r in carried[checks._DONE]] == ["sessions", "artifacts", "logs", "fence"]

    acts.ran.clear()
    second, _ = attempt(acts, [carried])
    assert second is not None
    assert acts.ran == ["memory"]
    assert [r.check for r in second.checks] == NAMES
    assert [r.passed for r in second.checks] == [True, True, True, False, True]


class WaitingChecks(FakeChecks):
    """Every check waits until ``CHECKERS`` of them are running at once (a check run after another never
    gets there: the barrier breaks after its timeout)."""

    def __init__(self) -> None:
        super().__init__(set())
        self.barrier = threading.Barrier(checks.CHECKERS, timeout=5)

    def check(self, ctx: CheckContext, progress: Beat | None = None) -> CheckResult:
        if ctx.inp.check in NAMES[: checks.CHECKERS]:
            self.barrier.wait()
        return super().check(ctx, progress)


def test_the_checks_run_at_once_and_their_heartbeats_reach_the_activity() -> None:
    acts = WaitingChecks()
    result, beats = attempt(acts, [])
    assert result is not None
    assert [r.check for r in result.checks] == NAMES
    assert {b["phase"] for b in beats if "phase" in b} == set(NAMES)  # each check's own beat, from its thread


@pytest.mark.parametrize(
    "details",
    [None, "x", [{"check": "sessions"}], [{"check": "sessions", "passed": True, "counts": 3, "detail": ""}]],
)
def test_malformed_heartbeat_details_are_checked_again(details: Any) -> None:
    assert checks._resumed(details) == {}

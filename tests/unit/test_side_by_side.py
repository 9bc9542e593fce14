"""Stores worked on side by side in plan order (``stores.adapters.side_by_side``): the sweeps' runner."""

from __future__ import annotations

import threading
import time
from typing import cast

import pytest
from temporalio.testing import ActivityEnvironment

from activities.store_steps import sweep_all
from stores.adapters.interface import Subject, Swept
from stores.adapters.registry import AdapterConfigError, AdapterRegistry, PlannedStep
from stores.adapters.side_by_side import side_by_side, within

# the shape of the built-in plan: five stores with no wait, memory after sessions, keys after every other
PLAN = [
    PlannedStep("artifacts", (), True),
    PlannedStep("logs", (), True),
    PlannedStep("sessions", (), True),
    PlannedStep("memory", ("sessions",), True),
    PlannedStep("keys", ("artifacts", "logs", "memory", "sessions"), True),
]


def test_stores_with_nothing_to_wait_for_run_at_once() -> None:
    """The three first stores meet at a barrier: only possible if they run at the same time (one after the
    other, the first would wait at the barrier until it breaks)."""
    barrier = threading.Barrier(3, timeout=5)

    def work(name: str) -> str:
        if name in ("artifacts", "logs", "sessions"):
            barrier.wait()
        return name.upper()

    assert side_by_side(PLAN, work) == {p.name: p.name.upper() for p in PLAN}


def test_a_store_starts_only_once_the_stores_it_runs_after_ended() -> None:
    events: list[str] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        with lock:
            events.append(f"start {name}")
        time.sleep(0.05 if name == "sessions" else 0.01)
        with lock:
            events.append(f"end {name}")

    side_by_side(PLAN, work)
    assert events.index("start memory") > events.index("end sessions")
    assert events.index("start keys") > max(events.index(f"end {n}") for n in ("artifacts", "logs", "memory"))


def test_each_result_is_handed_over_in_the_callers_thread_as_its_store_ends() -> None:
    caller = threading.get_ident()
    seen: list[tuple[str, int, bool]] = []
    side_by_side(PLAN, lambda name: len(name), lambda name, n: seen.append((name, n, threading.get_ident() == caller)))
    assert sorted(seen) == sorted((p.name, len(p.name), True) for p in PLAN)
    assert seen[-1][0] == "keys"


def test_an_error_starts_nothing_more_lets_the_running_end_and_is_raised() -> None:
    ended: list[str] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        if name == "sessions":
            raise RuntimeError("sessions store down")
        time.sleep(0.05)
        with lock:
            ended.append(name)

    with pytest.raises(RuntimeError, match="sessions store down"):
        side_by_side(PLAN, work)
    assert sorted(ended) == ["artifacts", "logs"]  # running when it failed: they ended; memory and keys never ran


def test_at_most_at_once_run_together() -> None:
    running = peak = 0
    lock = threading.Lock()
    plan = [PlannedStep(f"s{n}", (), True) for n in range(6)]

    def work(name: str) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.03)
        with lock:
            running -= 1

    side_by_side(plan, work, at_once=2)
    assert peak == 2


def test_within_keeps_the_named_steps_and_their_waits_among_them() -> None:
    part = within(PLAN, ["keys", "memory", "artifacts"])
    assert [(p.name, p.after) for p in part] == [("artifacts", ()), ("memory", ()), ("keys", ("artifacts", "memory"))]


def test_a_cycle_is_refused_not_left_half_done() -> None:
    cycle = [PlannedStep("a", ("b",), True), PlannedStep("b", ("a",), True)]
    with pytest.raises(ValueError, match="cycle"):
        side_by_side(cycle, lambda name: name)


class _SweepingStore:
    """A store whose sweep finds ``found`` and waits at ``barrier`` when given (a fake: pure runner logic)."""

    def __init__(self, name: str, found: dict[str, int], barrier: threading.Barrier | None = None) -> None:
        self.name, self.found, self.barrier = name, found, barrier

    def sweep_before(self, subject: object, before: object, keys_shredded_at: object) -> Swept:
        if self.barrier is not None:
            self.barrier.wait()
        return Swept(dict(self.found), {"malformed_log_lines": 1} if self.name == "logs" else {})


class _Registry:
    def __init__(self, stores: list[_SweepingStore]) -> None:
        self.by_name = {s.name: s for s in stores}
        self.plan = [p for p in PLAN if p.name in self.by_name]
        self.names = [p.name for p in self.plan]

    def get(self, name: str) -> _SweepingStore:
        if name not in self.by_name:
            raise AdapterConfigError(f"no adapter named {name!r} is registered on this worker")
        return self.by_name[name]


def test_the_second_sweep_runs_its_stores_side_by_side_and_merges_in_plan_order() -> None:
    """On the code before, the stores were swept one after the other: the first waited at the barrier alone
    until it broke. The counts are merged in plan order whichever store ended first (a name two stores share
    is prefixed by the later store), and each store's end is a heartbeat naming it."""
    barrier = threading.Barrier(3, timeout=5)
    registry = _Registry(
        [
            _SweepingStore("artifacts", {"objects": 2}, barrier),
            _SweepingStore("logs", {"log_lines": 1}, barrier),
            _SweepingStore("sessions", {"objects": 3}, barrier),
            _SweepingStore("memory", {"memories": 0}),
            _SweepingStore("keys", {"data_keys": 1}),
        ]
    )
    env = ActivityEnvironment()
    beats: list[dict[str, object]] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    deleted_in: set[str] = set()
    subject = Subject("er_1", "sk", "app", "user")
    found, reported = env.run(sweep_all, cast(AdapterRegistry, registry), subject, registry.names, deleted_in)
    assert found == {"objects": 2, "log_lines": 1, "sessions.objects": 3, "memories": 0, "data_keys": 1}
    assert reported == {"malformed_log_lines": 1}
    assert deleted_in == {"artifacts", "logs", "sessions", "keys"}
    assert sorted(str(b["phase"]) for b in beats) == sorted(registry.names)
    assert beats[-1]["phase"] == "keys"


def test_a_store_the_worker_does_not_have_fails_the_sweep_before_anything_runs() -> None:
    registry = _Registry([_SweepingStore("artifacts", {"objects": 2})])
    with pytest.raises(AdapterConfigError, match="no adapter named 'chroma'"):
        ActivityEnvironment().run(
            sweep_all, cast(AdapterRegistry, registry), Subject("er_1", "sk", "app", None), ["artifacts", "chroma"]
        )

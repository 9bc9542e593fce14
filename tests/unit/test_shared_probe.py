"""``SharedProbe``: one deletion-queue marker serves every caller that asked before it was written, and only
those (a marker written before a caller's deletions proves nothing about them). Real threads. And the
compaction step's fallback when the filer leaves no marker chunk to watch."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from stores.ledgers.deletion_queue import SharedProbe


def test_callers_who_asked_before_a_probe_started_share_it() -> None:
    shared, gate, started = SharedProbe(), threading.Event(), threading.Event()
    waiting: set[str] = set()
    everyone_waits = threading.Event()
    probes: list[str] = []

    def blocker() -> None:  # a probe that started before any caller below asked: it serves none of them
        started.set()
        gate.wait(5)

    def probe() -> None:
        probes.append(threading.current_thread().name)

    def waited() -> None:
        waiting.add(threading.current_thread().name)
        if len(waiting) == 6:
            everyone_waits.set()

    with ThreadPoolExecutor(7) as pool:
        first = pool.submit(shared.wait, blocker, lambda: None, 0.01)
        assert started.wait(5)
        callers = [pool.submit(shared.wait, probe, waited, 0.01) for _ in range(6)]
        assert everyone_waits.wait(5)  # all six have asked (they wait on the blocker)
        gate.set()
        assert first.result(5) is True
        ran = [f.result(5) for f in callers]
    # one of them ran the next probe, which started after all six had asked: it serves every one of them
    assert ran.count(True) == 1
    assert len(probes) == 1
    assert shared.runs == 2


def test_a_caller_who_asked_while_a_probe_ran_waits_for_one_that_started_after_it() -> None:
    shared, gate, first_started = SharedProbe(), threading.Event(), threading.Event()
    starts: list[float] = []

    def probe() -> None:
        starts.append(time.monotonic())
        first_started.set()
        gate.wait(5)

    with ThreadPoolExecutor(2) as pool:
        early = pool.submit(shared.wait, probe, lambda: None, 0.01)
        assert first_started.wait(5)
        time.sleep(0.02)
        asked = time.monotonic()
        late = pool.submit(shared.wait, probe, lambda: None, 0.01)
        time.sleep(0.05)
        gate.set()
        assert early.result(5) is True
        assert late.result(5) is True  # the running probe started before it asked: it ran its own
    assert shared.runs == 2
    assert starts[0] < asked < starts[1]


def test_a_failed_probe_serves_nobody_and_the_next_caller_runs_its_own() -> None:
    shared, gate, started = SharedProbe(), threading.Event(), threading.Event()
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        started.set()
        gate.wait(5)
        raise ConnectionError("filer unreachable")

    def working() -> None:
        calls.append(2)

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(shared.wait, failing, lambda: None, 0.01)
        assert started.wait(5)
        second = pool.submit(shared.wait, working, lambda: None, 0.01)  # asked while the failing one ran
        time.sleep(0.05)
        gate.set()
        with pytest.raises(ConnectionError):
            first.result(5)
        assert second.result(5) is True
    assert calls == [1, 2]
    assert shared.runs == 2


def test_a_marker_the_filer_kept_inline_falls_back_to_the_fixed_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """No chunk to watch (the filer keeps small files inline): the compaction step waits SETTLE_SECONDS, as
    without a filer, and then takes its bound."""
    from datetime import UTC, datetime

    from stores.ledgers.deletion_queue import MarkerInline
    from stores.physical import compaction

    class InlineQueue:
        def drain(self, deadline: float, waiting: object) -> None:
            raise MarkerInline("inline")

    class Books:
        def now(self) -> datetime:
            return datetime(2026, 12, 2, tzinfo=UTC)

    monkeypatch.setattr(compaction, "SETTLE_SECONDS", 0.05)
    adapter = object.__new__(compaction.CompactionAdapter)
    adapter.queue, adapter.drains, adapter.books = InlineQueue(), SharedProbe(), Books()  # type: ignore[assignment]
    beats: list[dict[str, object]] = []
    started = time.monotonic()
    assert adapter._settle(beats.append) == datetime(2026, 12, 2, tzinfo=UTC)
    assert time.monotonic() - started >= 0.05
    assert beats
    assert all("settling" in b for b in beats)  # the fixed wait's heartbeats, not the marker's

"""The rate limits' windows as pure logic (``console.rate_limits``): the in-memory fake counts the way the
database's statement does, on a clock the test moves; buckets name no one."""

from __future__ import annotations

from console.rate_limits import MemoryCounter, RateLimits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_window_counts_every_call_until_it_ends_and_names_the_time_left() -> None:
    clock = Clock()
    counter = MemoryCounter(clock)
    assert [counter.take("b", 60.0).count for _ in range(3)] == [1, 2, 3]
    clock.now += 45
    refused = counter.take("b", 60.0)
    assert (refused.count, refused.resets_in) == (4, 15.0)  # refused calls count; the window does not move
    assert refused.over(3)
    assert not refused.over(4)
    clock.now += 15  # the wait it named: a fresh window
    assert counter.take("b", 60.0).count == 1
    assert counter.take("other", 60.0).count == 1  # buckets apart


def test_ended_windows_are_forgotten_when_a_window_opens() -> None:
    clock = Clock()
    counter = MemoryCounter(clock)
    counter.take("old", 10.0)
    clock.now += 11
    counter.take("new", 10.0)
    assert set(counter._windows) == {"new"}


def test_a_bucket_is_its_kind_and_a_keyed_digest_of_whom_it_limits() -> None:
    limits = RateLimits(MemoryCounter(), b"k" * 32)
    bucket = limits.bucket("principal.search", "rita@compliance.example")
    kind, digest = bucket.split(":")
    assert kind == "principal.search"
    assert len(digest) == 32
    assert "rita" not in bucket
    assert bucket == limits.bucket("principal.search", "rita@compliance.example")  # every process: the same
    assert bucket != RateLimits(MemoryCounter(), b"j" * 32).bucket("principal.search", "rita@compliance.example")
    assert limits.take("principal.search", "rita@compliance.example", 60).count == 1
    assert limits.take("principal.search", "rosa@compliance.example", 60).count == 1

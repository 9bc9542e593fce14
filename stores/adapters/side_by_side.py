"""Work side by side: a plan's stores, each as soon as the stores it runs after are done (``side_by_side``);
a store's own items, a few at a time (``few_at_a_time``).

The saga's main pass does this with one activity per store (``workflows.erasure.plan``); the sweeps run every
store of a plan inside one activity (the saga's second sweep) or one scheduled step (the late-writer sweep),
and before this module they ran the stores one after the other, so a sweep cost the sum of its stores' reads
(0.09 s for a `large` user at 10 background users, 0.66 s at 100,000, issue 30). Here the stores whose
``after`` are done run at once, ``AT_ONCE`` at most, each in a copy of the caller's context (an activity's
heartbeats and log fields stay the activity's); ``on_done`` is called in the caller's thread as each store
ends, so a heartbeat (and the crash drill's pause after it) comes from the activity's own thread.

An error stops the stores not yet started; the ones running end first, then the first error is raised (a
sweep is idempotent: the retry runs them all again).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from stores.adapters.registry import PlannedStep

T = TypeVar("T")
Item = TypeVar("Item")

#: stores worked on at once (each holds a pooled connection or an S3 connection while it runs)
AT_ONCE = 4


def within(plan: Sequence[PlannedStep], names: Sequence[str]) -> list[PlannedStep]:
    """The plan's steps named in ``names``, in plan order, each waiting only for the others named."""
    wanted = set(names)
    return [
        PlannedStep(p.name, tuple(a for a in p.after if a in wanted), p.batched, p.after_sweep)
        for p in plan
        if p.name in wanted
    ]


def side_by_side(
    plan: Sequence[PlannedStep],
    work: Callable[[str], T],
    on_done: Callable[[str, T], None] | None = None,
    at_once: int = AT_ONCE,
) -> dict[str, T]:
    """``work(name)`` for every step of ``plan``, each once its ``after`` (those within ``plan``) are done;
    the results by name."""
    names = {p.name for p in plan}
    waits = {p.name: set(p.after) & names for p in plan}
    results: dict[str, T] = {}
    running: dict[Future[T], str] = {}
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max(1, at_once), thread_name_prefix="side-by-side") as pool:
        while True:
            started = set(running.values()) | set(results)
            if not errors:
                for p in plan:
                    if len(running) >= at_once:
                        break
                    if p.name not in started and waits[p.name] <= set(results):
                        running[pool.submit(contextvars.copy_context().run, work, p.name)] = p.name
                        started.add(p.name)
            if not running:
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    results[name] = future.result()
                except Exception as error:  # the running ones still end; nothing new starts
                    errors.append(error)
                    continue
                if on_done is not None:
                    on_done(name, results[name])
    if errors:
        raise errors[0]
    if len(results) < len(plan):  # only a plan whose steps wait for each other in a cycle
        raise ValueError(f"steps wait for each other in a cycle: {', '.join(sorted(names - set(results)))}")
    return results


def few_at_a_time(work: Callable[[Item], T], items: Sequence[Item], at_once: int) -> Iterator[T]:
    """``work(item)`` for every item, ``at_once`` at most, each in a copy of the caller's context; the results
    as they end. The next item starts only when the caller asks for the next result, so whatever the caller
    does with one (a heartbeat, and a crash drill's pause after it) comes before any further work starts.
    An error is raised once the running items have ended; nothing new starts after it."""
    todo = list(items)
    running: set[Future[T]] = set()
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max(1, at_once), thread_name_prefix="few-at-a-time") as pool:
        while todo or running:
            while todo and not errors and len(running) < at_once:
                running.add(pool.submit(contextvars.copy_context().run, work, todo.pop(0)))
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                try:
                    result = future.result()
                except Exception as error:
                    errors.append(error)
                    continue
                if not errors:
                    yield result
    if errors:
        raise errors[0]

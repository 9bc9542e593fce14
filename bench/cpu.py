"""CPU seconds per process of the stack, for the capacity model: what one erasure costs each component.

The benchmark starts the local stack from its own process, so every server is a descendant of it. A snapshot
sums user + system CPU per component, found by the executable's name: ``postgres`` (the postmaster, its
backends, and the CPU of backends already gone, which the postmaster reaped: its children's times),
``weed`` (SeaweedFS: master, volume, filer and S3 in one process), ``temporal`` (the dev server), ``moto``
(the KMS endpoint) and ``valkey`` (the response cache). ``worker`` is the benchmark's own process: the
in-process worker, and the client that files the requests (a production worker has no client in it, so
this slightly overstates it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import psutil

COMPONENTS = ("worker", "temporal", "postgres", "object_store", "kms", "cache")


def component_of(process: psutil.Process) -> str | None:
    try:
        name = process.name().lower()
        cmdline = " ".join(process.cmdline()).lower()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if name.startswith("postgres"):
        return "postgres"
    if name.startswith("weed"):
        return "object_store"
    if name.startswith("temporal"):
        return "temporal"
    if "valkey" in name or "valkey" in cmdline:
        return "cache"
    if "moto" in cmdline:
        return "kms"
    return None


def _own(times: Any) -> float:
    return float(times.user + times.system)


def _reaped(times: Any) -> float:
    return float(getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0))


def snapshot(root_pid: int | None = None) -> dict[str, float]:
    """CPU seconds so far per component (see the module docstring)."""
    root = psutil.Process(root_pid or os.getpid())
    totals = dict.fromkeys(COMPONENTS, 0.0)
    totals["worker"] = _own(root.cpu_times())
    for child in root.children(recursive=True):
        component = component_of(child)
        if component is None:
            continue
        try:
            times = child.cpu_times()
            parent = child.parent()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        totals[component] += _own(times)
        if parent is None or component_of(parent) != component:  # the component's root: its reaped children
            totals[component] += _reaped(times)
    return totals


def per_item(before: Mapping[str, float], after: Mapping[str, float], items: int) -> dict[str, float]:
    """CPU seconds per item (an erasure) of each component between two snapshots."""
    n = max(items, 1)
    return {c: round((after.get(c, 0.0) - before.get(c, 0.0)) / n, 4) for c in COMPONENTS}

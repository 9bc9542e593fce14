"""The capacity model: measured cost per erasure, turned into what a month of erasures needs.

Measured by the benchmark (``bench.json``'s values, medians): CPU seconds per small erasure for each process
of the stack (figure 3, ``bench/cpu.py``: the throughput batch's CPU divided by its erasures), Temporal
actions per erasure from the histories and the heartbeats estimated beside them (``bench/actions.py``), and,
when the backlog ran, the worker processes' own CPU seconds per erasure (figure 8).

Extrapolated (on paper, said so in every table): a month of ``N`` erasures arrives at an average rate of
``N / 30 days``, with a peak of ``PEAK`` times that (erasure requests bunch: a retention wave, a product shut
down, a quarterly clean-up); a process is sized to run at ``UTILISATION`` of a core at the peak; a Python
worker uses about one core (the GIL), and at least two run for availability. The Temporal figure is the
local dev server's (one process, SQLite): a production cluster spreads it over frontend, history, matching
and its database, and Temporal Cloud bills actions instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

SECONDS_PER_MONTH = 30 * 86_400
PEAK = 10.0
UTILISATION = 0.6
MIN_WORKERS = 2
MONTHLY = (10_000, 1_000_000)


@dataclass(frozen=True)
class Measured:
    cpu: Mapping[str, float]  # component -> CPU seconds per erasure
    actions: float  # Temporal actions per erasure, from the histories
    heartbeats: float  # activity heartbeats per erasure, estimated (billed by Temporal Cloud too)

    @classmethod
    def from_values(cls, values: Mapping[str, Sequence[float]]) -> Measured:
        """From ``bench.json``'s ``values`` (lists per run; medians taken). The backlog's worker-process CPU,
        when measured, replaces the in-process worker's (which also carries the filing client)."""

        def med(key: str) -> float:
            found = values.get(key) or []
            return float(median(found)) if found else 0.0

        cpu = {
            key.removeprefix("cpu_").removesuffix("_per_erasure"): med(key)
            for key in values
            if key.startswith("cpu_") and key.endswith("_per_erasure")
        }
        backlog_worker = med("backlog_worker_cpu_seconds_per_erasure_1w")
        if backlog_worker:
            cpu["worker"] = backlog_worker
        actions = med("actions_per_small_erasure") or med("actions_small")
        return cls(cpu, actions, med("heartbeats_small"))


def cores_at_peak(cpu_per_erasure: float, per_month: int) -> float:
    return per_month / SECONDS_PER_MONTH * PEAK * cpu_per_erasure


def workers_needed(cpu_per_erasure: float, per_month: int) -> int:
    return max(MIN_WORKERS, math.ceil(cores_at_peak(cpu_per_erasure, per_month) / UTILISATION))


def table(measured: Measured, monthly: Sequence[int] = MONTHLY) -> list[tuple[str, list[str]]]:
    """(row label, one cell per monthly volume)."""
    cpu = measured.cpu
    billed = measured.actions + measured.heartbeats
    rows: list[tuple[str, list[str]]] = [
        (
            "erasures per second, average / peak",
            [f"{n / SECONDS_PER_MONTH:.4f} / {n / SECONDS_PER_MONTH * PEAK:.3f}" for n in monthly],
        ),
        (
            "worker processes (1 core each, 60% at peak, at least 2)",
            [str(workers_needed(cpu.get("worker", 0.0), n)) for n in monthly],
        ),
        ("Temporal actions per month (history + heartbeats)", [f"{n * billed:,.0f}" for n in monthly]),
        ("Temporal actions per second at peak", [f"{n / SECONDS_PER_MONTH * PEAK * billed:.2f}" for n in monthly]),
    ]
    for component, label in (
        ("temporal", "Temporal server CPU at peak (self-hosted), cores"),
        ("postgres", "Postgres CPU at peak, cores"),
        ("object_store", "object store CPU at peak (SeaweedFS), cores"),
        ("kms", "KMS endpoint CPU at peak, cores"),
    ):
        if cpu.get(component):
            rows.append((label, [f"{cores_at_peak(cpu[component], n):.3f}" for n in monthly]))
    return rows


def bottleneck(measured: Measured) -> str:
    """The process that needs the most CPU per erasure: the first to saturate as the volume grows."""
    if not measured.cpu:
        return "unknown (no CPU figures)"
    component = max(measured.cpu, key=lambda c: measured.cpu[c])
    return f"{component} ({measured.cpu[component]:.3f} CPU s per erasure)"


def markdown(measured: Measured, monthly: Sequence[int] = MONTHLY) -> str:
    head = "| per month | " + " | ".join(f"{n:,} erasures" for n in monthly) + " |"
    lines = [head, "|---|" + "---|" * len(monthly)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in table(measured, monthly)]
    measured_line = ", ".join(f"{c} {s:.3f} s" for c, s in sorted(measured.cpu.items()))
    lines += [
        "",
        f"Measured per small erasure: CPU {measured_line}; {measured.actions:.0f} Temporal actions from the "
        f"histories, {measured.heartbeats:.0f} heartbeats estimated. Extrapolated: a {PEAK:.0f}x peak over the "
        f"monthly average, {UTILISATION:.0%} of a core per process at the peak. First bottleneck: "
        f"{bottleneck(measured)}.",
    ]
    return "\n".join(lines) + "\n"

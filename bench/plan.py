"""What a benchmark run measures: sizes, repetitions and which figures (``python -m bench``'s options, decided once)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Plan:
    quick: bool
    runs: int
    target_size: str  # the measured user ("large"; "typical" in quick mode)
    background_small: int  # background users of "typical" size (ADK services), small platform
    background_large: (
        int  # ... large platform: the users beyond background_small are bulk-seeded (workers.stack.seeding.bulk_seed)
    )
    concurrent: int  # concurrent "small" erasures for throughput
    out_dir: Path
    expiry_background: int = 5_000  # background memory rows of the expiry figure (then 10x as many)
    expiry_rows: int = 40  # expired rows the sweep forgets at each size ...
    expiry_subjects: int = 8  # ... of this many users (one forget each)
    search_rows: int = 2_000  # memory rows of the user whose search is timed sealed vs plain (figure 7)
    backlog: int = 0  # small erasures filed at once, drained by 1 then 2 worker processes (figure 8; 0: skipped)
    bulk_keys: str = "offline"  # bulk seeding's data keys: wrapped by the local KMS key; "kms": one call each
    huge: bool = False  # figure 9: a ``huge`` user (10x large, bulk-seeded) by saga and its twin directly

    @classmethod
    def make(
        cls,
        quick: bool,
        runs: int | None,
        out_dir: Path,
        size: str | None = None,
        backlog: int | None = None,
        background: int | None = None,
        bulk_keys: str = "offline",
        huge: bool | None = None,
    ) -> Plan:
        if quick:
            plan = cls(True, runs or 1, size or "typical", 10, 1_000, 20, out_dir, backlog=backlog or 0)
        else:
            full = cls(False, runs or 3, size or "large", 10, 100_000, 100, out_dir, 50_000, 200, 20, 13_000)
            plan = dataclasses.replace(full, backlog=1000 if backlog is None else backlog)
        if background is not None:
            plan = dataclasses.replace(plan, background_large=max(background, plan.background_small))
        return dataclasses.replace(plan, bulk_keys=bulk_keys, huge=not quick if huge is None else huge)

"""What was measured: one erasure's record and every figure's values per run (the report reads these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Erasure:
    request_id: str
    wall: float
    status: str
    calls: dict[str, int]
    raw_calls: dict[str, int]
    steps: list[tuple[str, float]]
    activity_counts: dict[str, int]
    verifier_in_saga: float
    activities: int = 0  # activities of the saga and its verifier children
    deleting: float = 0.0  # seconds while at least one deleting activity ran (they run side by side)
    busy: float = 0.0  # seconds while at least one activity or child workflow ran
    actions: dict[str, int] = field(default_factory=dict)  # Temporal actions by kind (bench/actions.py)


@dataclass
class Figures:
    """Every measured value, per run, as lists (medians are taken at the end)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

"""Render a request's progress for the terminal (the CLI's live display)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

from workflows.contracts.erasure import Progress

_ICON = {"pending": "·", "running": "▶", "done": "✔", "failed": "✖", "skipped": "-"}


def render(progress: Progress, now: datetime | None = None) -> list[str]:
    now = now or datetime.now(UTC)
    due = datetime.fromisoformat(progress.due_at) if progress.due_at else None
    left = f"{(due - now).days} days left" if due else ""
    lines = [f"request {progress.request_id}  status {progress.status}  stage {progress.stage}  {left}".rstrip()]
    if progress.on_hold:
        lines.append("  ON HOLD: waiting for the legal hold to be released")
    for step in progress.steps:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(step.counts.items()) if v)
        lines.append(f"  {_ICON.get(step.state, '?')} {step.name:<14} {step.state:<8} {counts}".rstrip())
    return lines


class LiveDisplay:
    """Redraws in place on a terminal; prints only changes otherwise (CI logs stay readable)."""

    def __init__(self) -> None:
        self._last: list[str] = []
        self._tty = sys.stdout.isatty()

    def show(self, lines: list[str]) -> None:
        if lines == self._last:
            return
        if self._tty and self._last:
            sys.stdout.write(f"\x1b[{len(self._last)}F\x1b[J")
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        self._last = lines


def render_verifications(body: dict[str, Any]) -> list[str]:
    """Each verification phase of a receipt body and its checks."""
    lines = []
    for phase in body["verifications"]:
        lines.append(f"  verification ({phase['phase']}): {'passed' if phase['passed'] else 'FAILED'}")
        for check in phase["checks"]:
            lines.append(f"    {'ok ' if check['passed'] else 'BAD'} {check['check']:<14} {check['detail']}")
    return lines

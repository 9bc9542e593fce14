"""Render a request's progress for the terminal (the CLI's live display)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

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

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._last: list[str] = []
        self.tty = self._stream.isatty()

    def show(self, lines: list[str]) -> None:
        if lines == self._last:
            return
        if self.tty and self._last:
            self._stream.write(f"\x1b[{len(self._last)}F\x1b[J")
        self._stream.write("\n".join(lines) + "\n")
        self._stream.flush()
        self._last = lines


def render_verifications(body: dict[str, Any]) -> list[str]:
    """Each verification phase of a receipt body and its checks."""
    lines = []
    for phase in body["verifications"]:
        lines.append(f"  verification ({phase['phase']}): {'passed' if phase['passed'] else 'FAILED'}")
        for check in phase["checks"]:
            lines.append(f"    {'ok ' if check['passed'] else 'BAD'} {check['check']:<14} {check['detail']}")
    return lines


class Throughput:
    """Progress of a long count in one line on stderr (stdout stays the command's answer): done of total,
    the rate so far and the time left at that rate (``line``); ``show`` redraws it in place on a terminal,
    and elsewhere prints it at most every ``every`` seconds (and at the end), so a log gets a few lines, not
    one per item."""

    def __init__(
        self,
        total: int,
        unit: str,
        *,
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.unit, self.every, self._clock = total, unit, every, clock
        self.started = clock()
        self._printed_at: float | None = None
        self._display = LiveDisplay(stream or sys.stderr)

    def line(self, done: int) -> str:
        elapsed = max(self._clock() - self.started, 1e-9)
        rate = done / elapsed
        left = (self.total - done) / rate if rate > 0 else None
        eta = "ETA -" if left is None else f"ETA {timedelta(seconds=round(left))}"
        return f"  {done}/{self.total} {self.unit}  {rate:.1f}/s  {eta if done < self.total else 'done'}"

    def show(self, done: int) -> None:
        now = self._clock()
        if self._display.tty or done >= self.total or self._printed_at is None or now - self._printed_at >= self.every:
            self._display.show([self.line(done)])
            self._printed_at = now

"""How often one data subject may be previewed for forgetting, and the alert when it is previewed too often.

A preview tells whoever asks whether the subject's items hold the description's words (that is what a
preview is for), so guessing at one subject's words through many previews is the way content could leak to
a role that may not read it. Each principal's previews are limited by ``console.http_guards.PrincipalLimits``;
this adds a limit per subject, whoever asks (``console_preview_per_subject_hour``, then 429 with
``Retry-After``), and an alert when a subject is previewed more than ``console_preview_burst_alert`` times in
an hour: an audit entry ``preview_burst`` and a structlog warning, both naming the subject by its
pseudonymous key only, once each time the count passes the threshold. Every preview is audited on its own
(``forget_previewed``). Counts live in this process, like the other rate limits: with several console
processes each keeps its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import structlog
from fastapi import Request

from console.audit import AuditLog
from console.context import Console
from console.http_guards import Buckets, too_many
from console.identity import Principal
from stores.infra.errors import InvalidIdentifier
from stores.privacy.identity import subject_key
from workers.service import RequestRefused, exact_user_id

log = structlog.get_logger("console.preview_guard")
HOUR = 3600.0


class PreviewGuard:
    """Admits a preview of one subject, or refuses it with 429; audits and logs a burst."""

    def __init__(
        self,
        audit: AuditLog,
        secret: bytes,
        per_subject_hour: int,
        burst_alert: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._audit = audit
        self._secret = secret
        self._buckets = Buckets(per_subject_hour, HOUR, clock)
        self._alert = burst_alert
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}  # subject key -> the last burst_alert + 1 previews' times
        self._lock = threading.Lock()

    def admit(self, p: Principal, app_name: str, user_id: str) -> None:
        """Count a preview of the subject (refused ones too: they are the guessing), alert on a burst, and
        raise 429 when the subject's hourly budget is spent. An id that can never be valid is left to the
        preview to refuse (422)."""
        try:
            key = subject_key(self._secret, app_name, exact_user_id(user_id, None))
        except (RequestRefused, InvalidIdentifier):
            return
        count = self._count(key)
        if count is not None:
            detail = {"subject_key": key, "previews_in_hour": count, "threshold": self._alert}
            log.warning("preview_burst", **detail)
            self._audit.append(p.actor, "preview_burst", None, detail)
        wait = self._buckets.take(key)
        if wait:
            raise too_many(wait, "previews of this data subject")

    def _count(self, key: str) -> int | None:
        """Note a preview of ``key``; the count in the last hour when it just passed the threshold, else None."""
        now = self._clock()
        with self._lock:
            times = self._seen.setdefault(key, deque(maxlen=self._alert + 1))
            while times and now - times[0] > HOUR:
                times.popleft()
            over_before = len(times) > self._alert
            times.append(now)
            if len(self._seen) > 10_000:  # forget the quiet ones
                self._seen = {k: t for k, t in self._seen.items() if t and now - t[-1] < HOUR}
            return len(times) if len(times) > self._alert and not over_before else None


def preview_guard_of(request: Request) -> PreviewGuard:
    """The app's preview guard (made with the app: ``console.app.create_app``)."""
    guard: PreviewGuard = request.app.state.preview_guard
    return guard


def preview_guard_for(console: Console) -> PreviewGuard:
    settings = console.settings
    return PreviewGuard(
        console.audit,
        console.platform.config.subject_secret,
        settings.console_preview_per_subject_hour,
        settings.console_preview_burst_alert,
    )

"""How often one data subject may be previewed for forgetting, and the alert when it is previewed too often.

A preview tells whoever asks whether the subject's items hold the description's words (that is what a
preview is for), so guessing at one subject's words through many previews is the way content could leak to
a role that may not read it. Each principal's previews are limited by ``console.http_guards.PrincipalLimits``;
this adds a limit per subject, whoever asks (``console_preview_per_subject_hour``, then 429 with
``Retry-After``), and an alert when a subject is previewed more than ``console_preview_burst_alert`` times in
an hour: an audit entry ``preview_burst`` and a structlog warning, both naming the subject by its
pseudonymous key only. Every preview is audited on its own (``forget_previewed``).

Both count one window an hour per subject in the database (``console.rate_limits``), shared by every console
process: counted in each process, a subject got its budget once per replica and a burst spread over them was
never alerted. The window's count decides both, so the alert is raised once per window, by whichever process
takes the call that passes the threshold, and refused previews count too (they are the guessing).
"""

from __future__ import annotations

import structlog
from fastapi import Request

from console.audit import AuditLog
from console.context import Console
from console.http_guards import too_many
from console.identity import Principal
from console.rate_limits import RateLimits
from stores.infra.errors import InvalidIdentifier
from stores.privacy.identity import subject_key
from workers.service import RequestRefused, exact_user_id

log = structlog.get_logger("console.preview_guard")
HOUR = 3600.0
#: the bucket kind of a subject's previews (``console.rate_limits``)
KIND = "subject.preview"


class PreviewGuard:
    """Admits a preview of one subject, or refuses it with 429; audits and logs a burst."""

    def __init__(
        self, audit: AuditLog, secret: bytes, limits: RateLimits, per_subject_hour: int, burst_alert: int
    ) -> None:
        self._audit = audit
        self._secret = secret
        self._limits = limits
        self._per_subject = per_subject_hour
        self._alert = burst_alert

    def admit(self, p: Principal, app_name: str, user_id: str) -> None:
        """Count a preview of the subject (refused ones too: they are the guessing), alert on a burst, and
        raise 429 when the subject's hourly budget is spent. An id that can never be valid is left to the
        preview to refuse (422)."""
        try:
            key = subject_key(self._secret, app_name, exact_user_id(user_id, None))
        except (RequestRefused, InvalidIdentifier):
            return
        window = self._limits.take(KIND, key, HOUR)
        if window.count == self._alert + 1:  # just passed the threshold: exactly one call in the window sees it
            detail = {"subject_key": key, "previews_in_hour": window.count, "threshold": self._alert}
            log.warning("preview_burst", **detail)
            self._audit.append(p.actor, "preview_burst", None, detail)
        if window.over(self._per_subject):
            raise too_many(window.resets_in, "previews of this data subject")


def preview_guard_of(request: Request) -> PreviewGuard:
    """The app's preview guard (made with the app: ``console.app.create_app``)."""
    guard: PreviewGuard = request.app.state.preview_guard
    return guard


def preview_guard_for(console: Console, limits: RateLimits) -> PreviewGuard:
    settings = console.settings
    return PreviewGuard(
        console.audit,
        console.platform.config.subject_secret,
        limits,
        settings.console_preview_per_subject_hour,
        settings.console_preview_burst_alert,
    )

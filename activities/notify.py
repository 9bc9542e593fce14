"""Notifications of console-filed requests: signed webhooks on every state change, the subject's e-mail.

A webhook is a JSON ``StateEvent`` (ids, subject key, state, stage, times: PII-free) POSTed to every
configured URL with ``X-Erasure-Timestamp`` and ``X-Erasure-Signature: v1=<hex>``, the HMAC-SHA256 under
the webhook secret of ``<timestamp>.<body>`` (a receiver recomputes it and rejects old timestamps). A
receiver that does not answer 2xx fails the activity, which Temporal retries with backoff; the URLs
already told are carried in the heartbeat, so a retry does not tell them twice.

The e-mail goes to the contact address given at filing (sealed in the request store like the raw user
id), through SMTP, once the erasure completed; the address is deleted right after. A crash between
sending and deleting sends it again on retry (at least once).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import time
from collections.abc import Callable
from dataclasses import asdict
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.support import keep_sensitive
from stores.infra.outbound import CALLBACK_HEADERS, Destination, OutboundRefused, check_destination, post_callback
from stores.platform import Platform
from workflows.contracts.erasure import Activities, StateEvent, SubjectNotice

log = structlog.get_logger("activities.notify")


#: our states as the Ketch forwarder protocol's statuses (api/dsr/v1/Status.md); None: not told
KETCH_STATUS: dict[str, str | None] = {
    "pending_approval": "pending",
    "approved": "in_progress",
    "running": "in_progress",
    "on_hold": "in_progress",
    "completed": "completed",
    "denied": "denied",
    "cancelled": "cancelled",
    "verification_failed": None,  # staff must act: the platform keeps seeing it in progress
    "failed": None,
}


def ketch_status_event(event: StateEvent, uid: str, tenant: str) -> bytes | None:
    """A ``DeleteStatusEvent`` (Ketch forwarder ``dsr/v1``) for a state change, or ``None``."""
    status = KETCH_STATUS.get(event.state)
    if status is None:
        return None
    return json.dumps(
        {
            "apiVersion": "dsr/v1",
            "kind": "DeleteStatusEvent",
            "metadata": {"uid": uid, "tenant": tenant},
            "event": {"status": status, "requestID": event.request_id},
        }
    ).encode()


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    return "v1=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class NotifyActivities:
    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    @activity.defn(name=Activities.WEBHOOK)
    def send_webhook(self, event: StateEvent) -> int:
        """Every configured webhook, then the request's own callbacks (a forwarded request's platform)."""
        config = self.platform.config
        details = activity.info().heartbeat_details
        told: list[str] = list(details[0]) if details else []
        body = json.dumps({"type": "erasure.state_changed", **asdict(event)}, sort_keys=True).encode()
        deliveries: list[tuple[str, bytes, dict[str, str]]] = []
        for url in config.webhook_urls:
            timestamp = str(int(time.time()))
            headers = {
                "X-Erasure-Timestamp": timestamp,
                "X-Erasure-Signature": signature(config.webhook_secret, timestamp, body),
                "X-Erasure-Event": f"{event.request_id}:{event.state}",
            }
            deliveries.append((url, body, headers))
        for n, callback in enumerate(self.platform.requests.callbacks(event.request_id)):
            status_event = ketch_status_event(event, callback.get("uid", ""), callback.get("tenant", ""))
            if status_event is not None:
                deliveries.append((f"{callback['url']}#{n}", status_event, dict(callback.get("headers", {}))))
        for key, content, headers in deliveries:
            if key in told:
                continue
            url = key.split("#", 1)[0]
            host = urlsplit(url).netloc
            destination: Destination | None = None
            if url not in config.webhook_urls:  # a forwarded request's callback: checked again right before
                try:
                    destination = check_destination(url, config.callback_allowlist)
                except OutboundRefused as exc:
                    log.warning("callback_refused", request_id=event.request_id, reason=str(exc))
                    told.append(key)  # never sent, never retried: counted as dealt with
                    continue
                headers = {k: v for k, v in headers.items() if k.lower() in CALLBACK_HEADERS}
            headers = {"Content-Type": "application/json", **headers}
            try:
                if destination is not None:  # to the address just checked, not the name resolved again
                    reply = post_callback(destination, content, headers, timeout=10.0)
                else:
                    reply = httpx.post(url, content=content, headers=headers, timeout=10.0, follow_redirects=False)
            except httpx.HTTPError as exc:
                raise ApplicationError(f"webhook {host} not reached ({type(exc).__name__})") from None
            if not 200 <= reply.status_code < 300:
                raise ApplicationError(f"webhook {host} answered {reply.status_code}")
            told.append(key)
            activity.heartbeat(told)
        return len(told)

    @activity.defn(name=Activities.NOTIFY_SUBJECT)
    def notify_subject(self, notice: SubjectNotice) -> bool:
        requests = self.platform.requests
        contact = requests.contact(notice.request_id)
        if contact is None:
            return False
        keep_sensitive(contact)  # masked in any error this attempt ends with (activities.boundary)
        config = self.platform.config
        if config.smtp_url:
            row = requests.get(notice.request_id)
            message = EmailMessage()
            message["From"] = config.mail_from
            message["To"] = contact
            message["Subject"] = "Your erasure request is complete"
            message.set_content(
                f"We have erased the personal data we held about you in {row.app_name}, and checked every store "
                f"afterwards.\n\nReference: {notice.request_id}\nReceipt fingerprint (SHA-256): "
                f"{notice.receipt_sha256}\n\nThis address is deleted now that this message is sent.\n"
            )
            _smtp_send(config.smtp_url, message)
        else:
            log.warning("subject_notice_not_sent", reason="no SMTP server configured")
        requests.forget_contact(notice.request_id)
        return bool(config.smtp_url)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.send_webhook, self.notify_subject]


def _smtp_send(url: str, message: EmailMessage) -> None:
    """``smtp://host:port`` (or ``smtps://``; user and password in the URL's userinfo, optional)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "localhost", parts.port or (465 if parts.scheme == "smtps" else 25)
    factory = smtplib.SMTP_SSL if parts.scheme == "smtps" else smtplib.SMTP
    try:
        with factory(host, port, timeout=10) as smtp:
            if parts.username:
                smtp.login(parts.username, parts.password or "")
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        raise ApplicationError(f"mail server {host}:{port} refused or unreachable ({type(exc).__name__})") from None

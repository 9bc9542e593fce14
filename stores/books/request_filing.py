"""What a request was filed with: where it came from, the requester's note, how the subject's identity was checked.

A compliance officer reading a request asks three things the erasure itself does not answer: who asked for it
and through which door (``source``), what the requester wrote for the approver (``note``), and how the person
asking was shown to be the data subject (``IdentityCheck``: the method, who checked and when; the document
itself, if any, is never stored here). The request store keeps the whole record sealed, like the reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

Source = Literal["console_form", "api", "csv", "ketch", "cli"]
SOURCES: tuple[Source, ...] = ("console_form", "api", "csv", "ketch", "cli")

#: how a data subject's identity may be verified, in words a reviewer reads on the request page
IDENTITY_METHODS: dict[str, str] = {
    "account_login": "the subject was signed in to their account when they asked",
    "email_confirmation": "confirmed through a link sent to the account's e-mail address",
    "document_checked": "an identity document was checked (not kept)",
    "knowledge_based": "answered questions only the account holder can answer",
    "authorized_agent": "an authorised agent, with the subject's signed permission",
    "forwarder_verified": "verified by the privacy platform that forwarded the request",
}


class FilingInvalid(ValueError):
    """A filing record that cannot be kept (an unknown method or source): nothing is filed."""


@dataclass(frozen=True)
class IdentityCheck:
    method: str
    verified_by: str
    verified_at: str  # ISO 8601

    @property
    def described(self) -> str:
        return IDENTITY_METHODS.get(self.method, self.method)


@dataclass(frozen=True)
class Filing:
    source: str
    note: str | None = None
    identity: IdentityCheck | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Filing:
        data: dict[str, Any] = json.loads(text)
        identity = data.get("identity")
        return cls(str(data["source"]), data.get("note"), IdentityCheck(**identity) if identity else None)


def filing(
    source: str,
    note: str | None = None,
    method: str | None = None,
    verified_by: str | None = None,
    verified_at: str | None = None,
) -> Filing:
    """A checked filing record: ``FilingInvalid`` for an unknown source or method, or a check without a method."""
    if source not in SOURCES:
        raise FilingInvalid(f"unknown source {source!r}")
    note = (note or "").strip() or None
    if not method:
        if verified_by or verified_at:
            raise FilingInvalid("an identity verification needs its method")
        return Filing(source, note, None)
    if method not in IDENTITY_METHODS:
        raise FilingInvalid(f"identity_method must be one of {', '.join(IDENTITY_METHODS)} (got {method!r})")
    at = verified_at or datetime.now(UTC).isoformat(timespec="seconds")
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise FilingInvalid("identity_verified_at must be a date or a time (ISO 8601)") from None
    if (when if when.tzinfo else when.replace(tzinfo=UTC)) > datetime.now(UTC):
        raise FilingInvalid("identity_verified_at is in the future")
    return Filing(source, note, IdentityCheck(method, (verified_by or "").strip(), at))

"""What may be remembered at all: the capture checks every memory write passes before it reaches a store.

A write is refused (counted and logged by reason and subject key, never raised into the agent's turn) when:

- it names no purpose (``no_purpose``), or a retention class, tier or source the policy does not know
  (``bad_lifecycle``);
- its text holds a credential or secret (``secret``): private keys, cloud and API tokens, bearer tokens,
  JWTs, "password is ..." and the like;
- its text holds a full payment card number (``payment_card``): 13 to 19 digits, spaces or dashes allowed,
  passing the Luhn check (a card's last four digits are fine);
- it is an instruction taken from untrusted content (``untrusted_instruction``): a write whose source is a
  retrieved document or a tool result and whose text tells the agent what to remember, store or do, and any
  procedure (an operating rule) that does not come from the user or the product's own configuration.

Pure functions only: the memory service applies them (``stores.memory.service``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stores.memory.lifecycle_rules import CONFIDENCE_BASES, RETENTION_CLASSES, SOURCE_KINDS, TIERS

REASONS = ("no_purpose", "bad_lifecycle", "secret", "payment_card", "untrusted_instruction")

_SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style secret keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),  # Google API keys
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWT
    re.compile(r"\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*", re.IGNORECASE),
    re.compile(
        r"\b(?:password|passwd|passcode|passphrase|pin|one[- ]time code|otp|api[ _-]?key|secret[ _-]?key|"
        r"access[ _-]?token|auth[ _-]?token|private[ _-]?key|cvv|cvc|security code)\b"
        r"(?:\s+(?:is|was|=|:)|\s*[:=])\s*\S+",
        re.IGNORECASE,
    ),
]
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_INSTRUCTION = re.compile(
    r"\b(?:remember|store|save|record|memori[sz]e|note|keep)\b.{0,60}\b(?:preference|that|this|as|forever)\b|"
    r"\bignore (?:all |any )?(?:previous|prior|earlier|above)\b|"
    r"\b(?:from now on|always|never|you must|you should|the assistant (?:must|should))\b",
    re.IGNORECASE,
)
#: where a procedure may come from: a deliberate instruction of the user, or the product's configuration
PROCEDURE_SOURCES = ("user", "system")
UNTRUSTED_SOURCES = ("document", "tool")


def luhn_valid(digits: str) -> bool:
    total = 0
    for n, ch in enumerate(reversed(digits)):
        d = int(ch)
        if n % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def holds_card_number(text: str) -> bool:
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            return True
    return False


def holds_secret(text: str) -> bool:
    return any(p.search(text) for p in _SECRET_PATTERNS)


@dataclass(frozen=True)
class Capture:
    """What a write says about itself (from ``MemoryEntry.custom_metadata`` or the service's defaults)."""

    purpose: str | None
    retention_class: str
    tier: str
    source_kind: str
    confidence_basis: str = "stated"


def refusal(text: str, capture: Capture) -> str | None:
    """The reason this write must not be stored, or ``None``."""
    if not (capture.purpose or "").strip():
        return "no_purpose"
    if (
        capture.retention_class not in RETENTION_CLASSES
        or capture.tier not in TIERS
        or capture.source_kind not in SOURCE_KINDS
        or capture.confidence_basis not in CONFIDENCE_BASES
    ):
        return "bad_lifecycle"
    if holds_secret(text):
        return "secret"
    if holds_card_number(text):
        return "payment_card"
    if capture.tier == "procedure" and capture.source_kind not in PROCEDURE_SOURCES:
        return "untrusted_instruction"
    if capture.source_kind in UNTRUSTED_SOURCES and _INSTRUCTION.search(text):
        return "untrusted_instruction"
    return None

"""What each reader is shown of a request's physical attestation (issue 40 item 7).

The signed attestation carries each physical store's own evidence: SeaweedFS volumes named by their volume
server's address (``127.0.0.1:8080/3``: ``host:port/volume``), before and after revisions, Postgres's vacuum
counters per table. That is the platform's inside, and a requester (who reaches only the receipts of what
their own person filed) has no use for it: a filer learns the object store's internal addresses from their
own receipt. So a reader whose receipt permission is limited to their own requests gets a redacted view: the
attestation's claims (request id, receipt digest, run, times, within the window, per store covered or not,
the key's bound) with the evidence dropped and any address in a note replaced. The console checked the
signature on the original and says so (``signature_valid``, ``linked_to_receipt``); the signed document
itself is not handed out, since a redacted copy could not verify.

Approvers and auditors, who read every request's receipts and check the platform's claims, get the signed
original with its evidence (the download included). The receipt itself is signed as a whole and shown as it
is: it names no address (its ``physical`` entry names the attestation's object key, not a host).
"""

from __future__ import annotations

import re
from typing import Any

from console.identity import Principal
from console.permissions import reach

#: an address inside a note: an IPv4 or bracketed IPv6 host, ``localhost`` or a dotted name, with a port
#: (and a volume id after it), or a SeaweedFS volume key ``host:port/id`` with a bare host name
ADDRESS = re.compile(
    r"(?:\[[0-9A-Fa-f:.]+\]|\d{1,3}(?:\.\d{1,3}){3}|localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{1,5}(?:/\d+)?"
    r"|\b[A-Za-z][\w-]*:\d{1,5}/\d+"
)
#: what stands in an address's place, and what the redacted view says it left out
WITHHELD = "(internal address)"
REDACTION = (
    "store evidence withheld (internal volume addresses, table counters): the console checked the signed "
    "original; approvers and auditors see it in full"
)


def sees_evidence(p: Principal) -> bool:
    """Whether ``p`` is shown the signed attestation with its evidence: a reader of every request's receipts
    (an approver, an auditor), not one limited to their own (a requester)."""
    return reach(p.roles, "receipts:read") == "all"


def scrub(text: str) -> str:
    return ADDRESS.sub(WITHHELD, text)


def redacted(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """The attestation's claims without the stores' evidence, every address in a note replaced."""
    if body is None:
        return None
    stores = [
        {"store": s.get("store"), "covered": s.get("covered"), "note": scrub(str(s.get("note") or ""))}
        for s in body.get("stores", [])
        if isinstance(s, dict)
    ]
    return {**{k: v for k, v in body.items() if k != "stores"}, "stores": stores, "redacted": REDACTION}

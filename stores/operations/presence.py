"""What a subject holds in each store when a request begins: bounded, indexed probes only.

Used to say plainly when nothing was found (an id the platform never stored, or stored under another
spelling) instead of completing with zero counts as if an erasure had happened, and to find the other
spellings of an id (trimmed, Unicode-normalised) that hold data of their own. Both come from the registered
adapters' ``locate``: no store is named here.
"""

from __future__ import annotations

from collections.abc import Sequence

from stores.adapters.counts import merged
from stores.adapters.interface import EraseAdapter, Subject
from stores.infra.errors import InvalidIdentifier
from stores.platform import Platform
from stores.privacy.identity import hash_or_none


def presence_by_store(platform: Platform, app_name: str, user_id: str, subject: str) -> dict[str, dict[str, int]]:
    """Per store of this process's registry, what it holds of the subject (its adapter's ``locate``: bounded,
    indexed probes)."""
    who = Subject("", subject, app_name, user_id)
    return {adapter.name: dict(adapter.locate(who)) for adapter in platform.adapters.in_order()}


def flattened(by_store: dict[str, dict[str, int]]) -> dict[str, int]:
    """One mapping of counts (a name two stores share is prefixed by the store)."""
    return merged(by_store)


def presence(platform: Platform, app_name: str, user_id: str, subject: str) -> dict[str, int]:
    """What each registered store holds of the subject, as one mapping of counts."""
    return flattened(presence_by_store(platform, app_name, user_id, subject))


def unplanned_stores(by_store: dict[str, dict[str, int]], plan: list[str]) -> list[str]:
    """Stores that hold the subject's data but that the request's plan does not name: the request must fail
    (a plan chosen by a process configured with fewer stores than the worker erases nothing there)."""
    return sorted(name for name, counts in by_store.items() if any(counts.values()) and name not in plan)


def ids_holding_data(platform: Platform, app_name: str, user_ids: Sequence[str]) -> list[str]:
    """Those of ``user_ids`` that hold data in any store of this process's registry.

    Each spelling is probed through every adapter's ``locate`` (bounded, indexed probes by the subject key
    and, for rows filed under it (plain ADK), the raw id), so a store added as a package of its own is probed
    with no edit here. A spelling that makes no subject key (a trimmed variant in the key's own form) is
    probed as it is; one a store cannot even name (``InvalidIdentifier``) holds nothing there."""
    secret = platform.config.subject_secret
    adapters = platform.adapters.in_order()
    found = []
    for given in dict.fromkeys(user_ids):
        who = Subject("", hash_or_none(secret, app_name, given) or given, app_name, given)
        if any(_holds(adapter, who) for adapter in adapters):
            found.append(given)
    return found


def _holds(adapter: EraseAdapter, who: Subject) -> bool:
    try:
        return any(adapter.locate(who).values())
    except InvalidIdentifier:
        return False

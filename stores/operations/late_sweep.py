"""The scheduled late-writer sweep for one erased subject, after its request completed.

The raw user id has been deleted by then, so everything is found through the subject key (memories,
artifact prefix, log index, data keys) and the session tombstones (ADK rows under an erased session id,
kept only when their user hashes to the subject). Only data dated before the subject's erasure is removed:
what a returning user created afterwards stays. Where a row reveals the raw user id (a memory row or a
re-created session of the subject), the user's older ADK sessions and ``user_states`` row are swept too.
Log lines are the subject's by structure only (``user_id`` hashing to the subject key, or the subject key
among the line's recorded mention keys); others' malformed lines are counted, never a failure.
"""

from __future__ import annotations

from stores.adapters.interface import Subject
from stores.adapters.side_by_side import side_by_side
from stores.ledgers.tombstones import LedgerEntry
from stores.platform import Platform

#: Others' malformed log lines seen (kept byte for byte): reported, not a finding.
MALFORMED_LOG_LINES = "malformed_log_lines"


def sweep_erased_subject(platform: Platform, entry: LedgerEntry) -> dict[str, int]:
    """Every registered store's ``sweep_before`` the subject's erasure time, side by side in plan order
    (sessions before memory, keys last: ``stores.adapters.side_by_side``); counts per store, merged in plan
    order, plus ``MALFORMED_LOG_LINES`` seen and kept."""
    subject = Subject(entry.request_id, entry.subject_key, entry.app_name, None)
    registry = platform.adapters
    swept = side_by_side(
        registry.plan, lambda name: registry.get(name).sweep_before(subject, entry.erased_at, entry.keys_shredded_at)
    )
    found: dict[str, int] = {}
    reported = 0
    for name in registry.names:
        for key, n in swept[name].found.items():
            found[f"{name}.{key}" if key in found else key] = n
        reported += sum(swept[name].reported.values())
    return {**found, MALFORMED_LOG_LINES: reported}

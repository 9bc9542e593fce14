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
from stores.adapters.sweeps import StoresSwept, sweep_stores
from stores.ledgers.tombstones import LedgerEntry
from stores.logs.adapter import MALFORMED
from stores.platform import Platform

#: Others' malformed log lines seen (kept byte for byte): the name the logs store reports them under;
#: reported, not a finding.
MALFORMED_LOG_LINES = MALFORMED


def sweep_erased(platform: Platform, entry: LedgerEntry) -> StoresSwept:
    """Every registered store's ``sweep_before`` the subject's erasure time (the one sweep loop,
    ``stores.adapters.sweeps``: side by side in plan order, sessions before memory, keys last): ``found``
    merged in plan order, ``reported`` (what the stores saw and kept) by the stores' own names."""
    subject = Subject(entry.request_id, entry.subject_key, entry.app_name, None)
    registry = platform.adapters
    return sweep_stores(registry, subject, registry.names, entry.erased_at, entry.keys_shredded_at)


def sweep_erased_subject(platform: Platform, entry: LedgerEntry) -> dict[str, int]:
    """``sweep_erased``'s counts as one mapping: what was found, then what was kept, each by its own name
    (``MALFORMED_LOG_LINES`` among them; a held owner's derived rows are ``derived_rows_held``, never
    malformed lines)."""
    swept = sweep_erased(platform, entry)
    return {**swept.found, **swept.reported}

"""Counts from several stores as one mapping: the one merge every caller uses.

``merged`` is how a pass over the stores reports what it found (the presence probes at filing, the second
sweep, the scheduled sweep): each store's counts under the adapter's own names, in the order given (plan
order); a name an earlier store already used is prefixed by the later store (``sessions.objects``), so no
count is lost and the common case reads plainly. ``summed`` adds counts of the same name: what stores saw and
kept (``reported``), or one pass's counts over many subjects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def merged(by_store: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """One mapping of counts, in ``by_store``'s order (a name two stores share is prefixed by the later store)."""
    found: dict[str, int] = {}
    for store, counts in by_store.items():
        for key, n in counts.items():
            found[f"{store}.{key}" if key in found else key] = n
    return found


def summed(many: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts of the same name added together, in the order the names first appear."""
    total: dict[str, int] = {}
    for counts in many:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total

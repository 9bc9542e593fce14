"""One sweep loop for both sweeps: every store of a plan's ``sweep_before``, side by side in plan order.

The saga's second sweep (``activities.store_steps``) passes no date bound: anything of the subject a late
writer slipped past the fence goes. The scheduled late-writer sweep (``stores.operations.late_sweep``) passes
``before`` (the subject's erasure time) and ``keys_shredded_at``: what a returning user wrote since stays.
Each store runs once the stores it runs after are swept (``stores.adapters.side_by_side``); ``on_done`` is
called in the caller's thread as each store ends (the second sweep's heartbeat names the store).

What the stores removed (``found``) is merged in plan order (``stores.adapters.counts.merged``); what they saw
and kept (``reported``: a held owner's derived rows, a held writer's log lines, others' malformed lines) is
kept apart, added up by its own names, never a finding. A store's gate that finds a hold inside its change
raises ``OwnerHeld`` (that store changed nothing): it leaves here, for the caller to end its sweep ``held``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from stores.adapters.counts import merged, summed
from stores.adapters.interface import Subject, Swept
from stores.adapters.registry import AdapterRegistry
from stores.adapters.side_by_side import side_by_side, within
from stores.privacy.redaction import sensitive


@dataclass(frozen=True)
class StoresSwept:
    """One sweep over several stores: ``found`` merged in plan order, ``reported`` summed by name (which stores
    removed something is told store by store through ``on_done``, so a sweep stopped midway still tells it)."""

    found: dict[str, int] = field(default_factory=dict)
    reported: dict[str, int] = field(default_factory=dict)


def sweep_stores(
    adapters: AdapterRegistry,
    subject: Subject,
    stores: Sequence[str],
    before: datetime | None = None,
    keys_shredded_at: datetime | None = None,
    on_done: Callable[[str, Swept], None] | None = None,
) -> StoresSwept:
    """Each of ``stores``' ``sweep_before(subject, before, keys_shredded_at)``, side by side in plan order.
    A store this process does not have fails the sweep before anything runs, as it fails an erase."""
    for name in stores:
        adapters.get(name)
    with sensitive(*([subject.user_id] if subject.user_id else [])):
        swept = side_by_side(
            within(adapters.plan, stores),
            lambda name: adapters.get(name).sweep_before(subject, before, keys_shredded_at),
            on_done,
        )
    in_order = {name: swept[name] for name in adapters.names if name in swept}
    return StoresSwept(
        merged({name: one.found for name, one in in_order.items()}),
        summed(one.reported for one in in_order.values()),
    )

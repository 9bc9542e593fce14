"""The lifecycle capabilities of an adapter, and the one pass that runs them on every registered store.

A store that keeps memories of its own (apart from the Postgres memory store, whose expiry is the forgetting
path and whose eviction and supersession run after each write through its fenced service) gets the lifecycle
through three optional capabilities of its adapter, each a store-wide pass:

``Expiring``     ``expire_due(now, beat)``: remove what is past its retention at ``now``;
``Evicting``     ``evict_over(caps, now, beat)``: per owner, evict down to ``caps`` by the memory policy's
                 ``victims`` (``stores.adapters.lifecycle_policy``): never a pinned item, never one past its retention;
``Superseding``  ``settle_superseded(beat)``: retire (kept as evidence, never recalled) what a later write of
                 the same owner said it corrects.

Each change goes through the store's one gated primitive, per owner: a held owner's data is never changed and
is counted as ``held``. Each returns ``LifecycleDone`` (PII-free counts) and heartbeats through ``beat`` as
it goes; each is idempotent (a retry finds only what is left). ``lifecycle_pass`` runs them on every adapter
that has them (the scheduled expiry sweep's last activity, ``activities.expiry``), in that order: what
expired is not evicted, and a superseded item still counts against the caps as the memory store's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from stores.adapters.interface import Beat, EraseAdapter
from stores.adapters.lifecycle_policy import Caps


@dataclass(frozen=True)
class LifecycleDone:
    """What one pass changed in one store (``changed``) and kept because its owner is held (``held``)."""

    changed: int = 0
    held: int = 0


@runtime_checkable
class Expiring(Protocol):
    def expire_due(self, now: datetime, beat: Beat) -> LifecycleDone: ...


@runtime_checkable
class Evicting(Protocol):
    def evict_over(self, caps: Caps, now: datetime, beat: Beat) -> LifecycleDone: ...


@runtime_checkable
class Superseding(Protocol):
    def settle_superseded(self, beat: Beat) -> LifecycleDone: ...


@dataclass(frozen=True)
class LifecycleTotals:
    """One pass over every store: per store and pass, ``(changed, held)``; and the totals."""

    stores: dict[str, dict[str, LifecycleDone]] = field(default_factory=dict)

    def total(self, name: str) -> int:
        return sum(done[name].changed for done in self.stores.values() if name in done)

    @property
    def held(self) -> int:
        return sum(d.held for done in self.stores.values() for d in done.values())


def _passes(adapter: object, caps: Caps, now: datetime) -> list[tuple[str, Callable[[Beat], LifecycleDone]]]:
    found: list[tuple[str, Callable[[Beat], LifecycleDone]]] = []
    if isinstance(adapter, Expiring):
        found.append(("expired", lambda beat: adapter.expire_due(now, beat)))
    if isinstance(adapter, Superseding):
        found.append(("superseded", adapter.settle_superseded))
    if isinstance(adapter, Evicting):
        found.append(("evicted", lambda beat: adapter.evict_over(caps, now, beat)))
    return found


def lifecycle_pass(
    adapters: Sequence[EraseAdapter], caps: Caps, now: datetime, beat: Callable[[dict[str, Any]], None]
) -> LifecycleTotals:
    """Run every lifecycle capability of every adapter; each beat names the store and the pass it is in."""
    totals: dict[str, dict[str, LifecycleDone]] = {}
    for adapter in adapters:
        for name, run in _passes(adapter, caps, now):
            totals.setdefault(adapter.name, {})[name] = run(_naming(beat, adapter.name, name))
    return LifecycleTotals(totals)


def _naming(beat: Callable[[dict[str, Any]], None], store: str, name: str) -> Beat:
    def named(details: dict[str, Any]) -> None:
        beat({"store": store, "pass": name, **details})

    return named

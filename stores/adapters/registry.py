"""The adapter registry: adapters come from entry points (group ``erasure.adapters``).

A platform adds its store as a package of its own that declares, in its ``pyproject.toml``::

    [project.entry-points."erasure.adapters"]
    vector_cache = "my_platform.erasure:VectorCacheAdapter"

The value is a factory called with one argument, a ``StoreContext`` (``stores.adapters.context``: the pool,
the S3 and KMS clients, the identity secret, the key service, the books, the stores' options), usually the
adapter class (a plug-in from another distribution gets the same context, never the ``Platform``). The
registry is built by the worker's wiring (``workers.wiring``), never by the platform. The order comes from
each adapter's declared ``after``: a dependency on an adapter that is not registered, two adapters with one
name, or a cycle is an ``AdapterConfigError`` when the registry loads (the worker refuses to start), never
a surprise in the middle of an erasure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

from stores.adapters.context import StoreContext
from stores.adapters.interface import (
    AFTER_EVERY_OTHER,
    ENTRY_POINT_GROUP,
    AdapterNotConfigured,
    EraseAdapter,
    SeesPeers,
)


class AdapterConfigError(Exception):
    """The registered adapters cannot form a plan (unknown dependency, duplicate name, cycle, bad shape)."""


@dataclass(frozen=True)
class PlannedStep:
    """One adapter's place in the plan: its name, the names it waits for (resolved), whether batched."""

    name: str
    after: tuple[str, ...]
    batched: bool
    #: physical clean-up: runs once the second sweep is done (``after_sweep = True`` on the adapter), so the
    #: sweep's deletions are covered too; "after every other" adapters do not wait for it
    after_sweep: bool = False


def after_sweep(adapter: EraseAdapter) -> bool:
    """Whether an adapter runs after the second sweep (an optional attribute; plug-ins without it do not)."""
    return bool(getattr(adapter, "after_sweep", False))


def discovered() -> dict[str, str]:
    """Registered entry points: adapter name -> ``module:attr`` (nothing imported)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


#: step names the saga uses for itself (and the verifier's fence check): no adapter may take one
RESERVED = frozenset({"fence", "verify_main", "wait", "sweep", "lift_fence", "verify_final", "finish", "receipt"})


def order(adapters: Sequence[EraseAdapter]) -> list[PlannedStep]:
    """The adapters in an order that honours every ``after``; ties broken by name (deterministic)."""
    names = [a.name for a in adapters]
    taken = sorted(set(names) & RESERVED)
    if taken:
        raise AdapterConfigError(f"adapter names reserved for the saga's own steps: {', '.join(taken)}")
    malformed = sorted(n for n in names if not n.replace("_", "").isalnum() or not n.isascii() or len(n) > 40)
    if malformed:
        raise AdapterConfigError(f"adapter names must be short ASCII words (letters, digits, _): {malformed!r}")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise AdapterConfigError(f"two adapters share a name: {', '.join(duplicates)}")
    late = {a.name for a in adapters if after_sweep(a)}
    waits_late = sorted(a.name for a in adapters if a.name not in late and set(a.after) & late)
    if waits_late:
        raise AdapterConfigError(f"adapters wait for a step that runs after the second sweep: {', '.join(waits_late)}")
    everyone_else = sorted(a.name for a in adapters if AFTER_EVERY_OTHER not in a.after and a.name not in late)
    deps: dict[str, set[str]] = {}
    for a in adapters:
        wanted = set(a.after) - {AFTER_EVERY_OTHER}
        unknown = sorted(wanted - set(names))
        if unknown:
            raise AdapterConfigError(f"adapter {a.name!r} runs after unregistered {', '.join(unknown)}")
        if AFTER_EVERY_OTHER in a.after:
            wanted |= set(everyone_else)
        deps[a.name] = wanted - {a.name}
    planned: list[PlannedStep] = []
    done: set[str] = set()
    by_name = {a.name: a for a in adapters}
    while len(done) < len(adapters):
        ready = sorted(n for n in deps if n not in done and deps[n] <= done)
        if not ready:
            cycle = sorted(n for n in deps if n not in done)
            raise AdapterConfigError(f"adapters depend on each other in a cycle: {', '.join(cycle)}")
        for n in ready:
            planned.append(PlannedStep(n, tuple(sorted(deps[n])), bool(by_name[n].batched), n in late))
            done.add(n)
    return planned


class AdapterRegistry:
    """The adapters of one process, built once from the entry points (plus ``extra`` ones, for embedding).

    ``context`` is what every factory is called with."""

    def __init__(self, context: StoreContext, extra: Iterable[EraseAdapter] = ()) -> None:
        built: list[EraseAdapter] = []
        self.not_configured: list[str] = []  # registered adapters whose store this platform does not have
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            try:
                adapter = ep.load()(context)
            except AdapterNotConfigured:  # this platform has no such store: not in its plans
                self.not_configured.append(ep.name)
                continue
            except Exception as exc:  # a broken plug-in stops the start with its name, not a traceback
                raise AdapterConfigError(f"adapter {ep.name!r} failed to load: {type(exc).__name__}: {exc}") from exc
            if not isinstance(adapter, EraseAdapter):
                raise AdapterConfigError(f"adapter {ep.name!r} does not provide the EraseAdapter interface")
            if adapter.name != ep.name:
                raise AdapterConfigError(f"entry point {ep.name!r} names an adapter called {adapter.name!r}")
            built.append(adapter)
        built.extend(extra)
        self._set(built)

    def _set(self, adapters: Sequence[EraseAdapter]) -> None:
        self._plan = order(adapters)
        self._by_name = {a.name: a for a in adapters}
        for adapter in adapters:  # an adapter whose work follows the others' (the vacuum: their tables)
            if isinstance(adapter, SeesPeers):
                adapter.see_peers(self.in_order())

    def replacing(self, adapter: EraseAdapter) -> AdapterRegistry:
        """A copy of this registry with ``adapter`` standing in for the one of the same name."""
        self.get(adapter.name)
        copy = object.__new__(AdapterRegistry)  # no entry point is loaded again
        copy.not_configured = list(self.not_configured)
        copy._set([adapter if a.name == adapter.name else a for a in self._by_name.values()])
        return copy

    @property
    def plan(self) -> list[PlannedStep]:
        return list(self._plan)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self._plan]

    def get(self, name: str) -> EraseAdapter:
        try:
            return self._by_name[name]
        except KeyError:
            raise AdapterConfigError(f"no adapter named {name!r} is registered on this worker") from None

    def in_order(self, names: Sequence[str] | None = None) -> list[EraseAdapter]:
        """Adapters in plan order (only ``names``, when given, e.g. a request's recorded plan)."""
        wanted = self.names if names is None else [n for n in self.names if n in set(names)]
        return [self._by_name[n] for n in wanted]

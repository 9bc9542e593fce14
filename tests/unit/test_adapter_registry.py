"""The registry's plan: declared dependencies honoured, ``*`` after every other store, and every shape that
cannot form a plan refused with its reason (a worker then refuses to start)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from stores.adapters.interface import AFTER_EVERY_OTHER, EraseAdapter
from stores.adapters.registry import AdapterConfigError, discovered, order


@dataclass
class Declared:
    """Only what ordering reads (name, after, batched)."""

    name: str
    after: tuple[str, ...] = ()
    batched: bool = True


def plan(*adapters: Declared) -> list[str]:
    return [p.name for p in order(adapters)]  # type: ignore[arg-type]


def test_the_built_in_adapters_are_registered_by_entry_point() -> None:
    assert discovered() == {
        "artifacts": "stores.artifacts.adapter:ArtifactsAdapter",
        "sessions": "stores.sessions.adapter:SessionsAdapter",
        "memory": "stores.memory.adapter:MemoryAdapter",
        "logs": "stores.logs.adapter:LogsAdapter",
        "keys": "stores.keys.adapter:KeysAdapter",
        "response_cache": "stores.response_cache.adapter:ResponseCacheAdapter",
        "chroma_memory": "stores.chroma.adapter:ChromaMemoryAdapter",
        "qdrant_memory": "stores.qdrant.adapter:QdrantMemoryAdapter",
        "vacuum": "stores.physical.vacuum:VacuumAdapter",
        "compaction": "stores.physical.compaction:CompactionAdapter",
    }


def test_dependencies_are_honoured_and_ties_go_by_name() -> None:
    built_in = [
        Declared("keys", (AFTER_EVERY_OTHER,), False),
        Declared("memory", ("sessions",)),
        Declared("sessions"),
        Declared("logs"),
        Declared("artifacts"),
    ]
    assert plan(*built_in) == ["artifacts", "logs", "sessions", "memory", "keys"]
    with_cache = [*built_in, Declared("response_cache", ("memory",))]
    assert plan(*with_cache) == ["artifacts", "logs", "sessions", "memory", "response_cache", "keys"]
    steps = {p.name: p for p in order(with_cache)}  # type: ignore[arg-type]
    assert steps["keys"].after == ("artifacts", "logs", "memory", "response_cache", "sessions")  # "*" resolved
    assert steps["keys"].batched is False


@pytest.mark.parametrize(
    ("adapters", "reason"),
    [
        ([Declared("a", ("b",)), Declared("b", ("a",))], "cycle: a, b"),
        ([Declared("a", ("a_missing",))], "runs after unregistered a_missing"),
        ([Declared("a"), Declared("a")], "share a name: a"),
        ([Declared("sweep")], "reserved for the saga's own steps: sweep"),
        ([Declared("fence")], "reserved for the saga's own steps: fence"),
        ([Declared("bad name")], "short ASCII words"),
        ([Declared("a", (AFTER_EVERY_OTHER,)), Declared("b", ("a",))], "cycle: a, b"),
    ],
)
def test_shapes_that_cannot_form_a_plan_are_refused(adapters: list[Declared], reason: str) -> None:
    with pytest.raises(AdapterConfigError, match=reason):
        order(adapters)  # type: ignore[arg-type]


def test_every_built_in_adapter_provides_the_whole_interface() -> None:
    from stores.artifacts.adapter import ArtifactsAdapter
    from stores.keys.adapter import KeysAdapter
    from stores.logs.adapter import LogsAdapter
    from stores.memory.adapter import MemoryAdapter
    from stores.physical.compaction import CompactionAdapter
    from stores.physical.vacuum import VacuumAdapter
    from stores.response_cache.adapter import ResponseCacheAdapter
    from stores.sessions.adapter import SessionsAdapter

    adapters = (ArtifactsAdapter, SessionsAdapter, MemoryAdapter, LogsAdapter, KeysAdapter, ResponseCacheAdapter)
    for cls in (*adapters, VacuumAdapter, CompactionAdapter):
        assert isinstance(cls.__new__(cls), EraseAdapter), cls.__name__

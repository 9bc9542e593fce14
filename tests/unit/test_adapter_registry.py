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
        "artifacts": "stores.adapters.artifacts:ArtifactsAdapter",
        "sessions": "stores.adapters.sessions:SessionsAdapter",
        "memory": "stores.adapters.memory:MemoryAdapter",
        "logs": "stores.adapters.logs:LogsAdapter",
        "keys": "stores.adapters.keys:KeysAdapter",
        "response_cache": "stores.adapters.response_cache:ResponseCacheAdapter",
        "chroma_memory": "stores.adapters.chroma_memory:ChromaMemoryAdapter",
        "vacuum": "stores.adapters.vacuum:VacuumAdapter",
        "compaction": "stores.adapters.compaction:CompactionAdapter",
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
    from stores.adapters.artifacts import ArtifactsAdapter
    from stores.adapters.compaction import CompactionAdapter
    from stores.adapters.keys import KeysAdapter
    from stores.adapters.logs import LogsAdapter
    from stores.adapters.memory import MemoryAdapter
    from stores.adapters.response_cache import ResponseCacheAdapter
    from stores.adapters.sessions import SessionsAdapter
    from stores.adapters.vacuum import VacuumAdapter

    adapters = (ArtifactsAdapter, SessionsAdapter, MemoryAdapter, LogsAdapter, KeysAdapter, ResponseCacheAdapter)
    for cls in (*adapters, VacuumAdapter, CompactionAdapter):
        assert isinstance(cls.__new__(cls), EraseAdapter), cls.__name__

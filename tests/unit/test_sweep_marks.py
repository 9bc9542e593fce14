"""A second sweep stopped by a store's gate (``OwnerHeld``) still says which stores it already emptied.

The physical clean-up covers a request's deletions only when it knows each store's last deletion
(``mark_deleted``). The sweep used to collect the stores it removed something from only once every store had
returned, so a hold found by one store's gate left the stores swept before it unmarked, and the physical job
could attest a pass that ran before their deletions. Pure logic: fake adapters, the real sweep loop."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.store_steps import sweep_all
from stores.adapters.interface import Subject, Swept
from stores.adapters.registry import PlannedStep
from stores.ledgers.owner_holds import OwnerHeld


class Emptied:
    name, after, batched = "first", (), False

    def sweep_before(self, _subject: Subject, _before: datetime | None, _shredded: datetime | None) -> Swept:
        return Swept({"rows": 2})


class Held:
    name, after, batched = "second", ("first",), False

    def sweep_before(self, _subject: Subject, _before: datetime | None, _shredded: datetime | None) -> Swept:
        raise OwnerHeld()


class Registry:
    def __init__(self, *adapters: Any) -> None:
        self._by_name = {a.name: a for a in adapters}
        self.names = list(self._by_name)
        self.plan = [PlannedStep(a.name, a.after, a.batched) for a in adapters]

    def get(self, name: str) -> Any:
        return self._by_name[name]


def test_a_sweep_a_hold_stops_still_names_the_stores_it_emptied() -> None:
    deleted_in: set[str] = set()
    subject = Subject("er_test", "sk_" + "0" * 40, "app")

    def run() -> None:
        sweep_all(Registry(Emptied(), Held()), subject, ["first", "second"], deleted_in)  # type: ignore[arg-type]

    try:
        ActivityEnvironment().run(run)
    except OwnerHeld:
        pass
    else:
        raise AssertionError("the held store's gate did not stop the sweep")
    assert deleted_in == {"first"}

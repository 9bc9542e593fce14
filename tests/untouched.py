"""The "other users stay byte-identical" comparison every erasure test makes, memory included.

Memory is the one store where an erasure deletes rows filed under other users on purpose: summaries and
facts derived from the erased user's rows. Those must be listed (the receipt's ``derived_rows_removed``, the
eraser's ``derived_ids``); every other memory row of every other user must be byte-identical, and nothing
may be added.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def assert_untouched(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], removed_memory_ids: Iterable[str] = ()
) -> None:
    removed = set(removed_memory_ids)
    for user, old in before.items():
        new = after[user]
        changed = {k for k in old if old[k] != new[k]} - {"memories", "memory_rows", "counts"}
        assert not changed, (user, changed)
        expected = {row: digest for row, digest in old["memory_rows"].items() if row not in removed}
        assert new["memory_rows"] == expected, (user, "memory rows changed beyond the listed derived rows")
        assert {k: v for k, v in new["counts"].items() if k != "memories"} == {
            k: v for k, v in old["counts"].items() if k != "memories"
        }, user

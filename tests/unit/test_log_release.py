"""Lifting one subject's layer off a sealed log line (``LineSealer.release``), on an in-memory key store.

The line stays openable without the released subject's key, its ``released`` field is bound as associated
data (dropped or widened, the line no longer opens), and a line whose layer cannot be lifted is left alone.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, cast

from stores.infra.errors import DataKeyShredded
from stores.logs.held_lines import keep_readable
from stores.logs.sealing import RELEASED, SEALED, UNREADABLE, LineSealer
from stores.privacy.crypto import DataKey

A, B, C = ("sk_" + c * 40 for c in "abc")


class Keys:
    """Current key per subject, lookup by key id, shredding: what ``LineSealer`` uses of ``DataKeyStore``."""

    def __init__(self) -> None:
        self.by_subject: dict[str, DataKey] = {}
        self.by_id: dict[uuid.UUID, DataKey] = {}

    def current(self, subject: str) -> DataKey:
        if subject not in self.by_subject:
            key = DataKey(uuid.uuid4(), os.urandom(32))
            self.by_subject[subject], self.by_id[key.key_id] = key, key
        return self.by_subject[subject]

    def get(self, key_id: uuid.UUID) -> DataKey:
        if key_id not in self.by_id:
            raise DataKeyShredded("gone")
        return self.by_id[key_id]

    def shred(self, subject: str) -> None:
        self.by_id.pop(self.by_subject.pop(subject).key_id)


def _sealer(keys: Keys) -> LineSealer:
    return LineSealer(cast(Any, keys))


def _line(keys: Keys, mentions: list[str]) -> dict[str, Any]:
    header = {"ts": "t", "level": "info", "app": "app", "subject": B, "mentions": mentions}
    return _sealer(keys).seal(header, {"user_id": "b", "msg": "wrote about a and c"})


def test_a_released_line_opens_without_the_subjects_key_and_keeps_its_other_layers() -> None:
    keys = Keys()
    line = _line(keys, [A, C])
    released = _sealer(keys).release(line, A)
    assert released is not None
    assert released[RELEASED] == [A]
    assert (released["lid"], released["mentions"]) == (line["lid"], [A, C])
    keys.shred(A)
    assert _sealer(keys).open(released)["msg"] == "wrote about a and c"
    assert _sealer(keys).open(line).get(UNREADABLE)  # the original needed A's key
    keys.shred(C)  # still sealed under C's layer too
    assert _sealer(keys).open(released).get(UNREADABLE)


def test_the_released_field_is_bound_to_the_line() -> None:
    keys = Keys()
    released = _sealer(keys).release(_line(keys, [A, C]), A)
    assert released is not None
    dropped = {k: v for k, v in released.items() if k != RELEASED}
    widened = {**released, RELEASED: [A, C]}
    assert _sealer(keys).open(dropped).get(UNREADABLE)
    assert _sealer(keys).open(widened).get(UNREADABLE)


def test_a_layer_that_cannot_be_lifted_leaves_the_line_as_it_was() -> None:
    keys = Keys()
    line = _line(keys, [A])
    keys.shred(A)
    assert _sealer(keys).release(line, A) is None
    raw = (json.dumps(line) + "\n").encode()
    kept = keep_readable(raw, A, _sealer(keys))
    assert (kept.line, kept.readable) == (raw, False)


def test_keep_readable_rewrites_once_and_keeps_the_line_end() -> None:
    keys = Keys()
    raw = (json.dumps(_line(keys, [A])) + "\n").encode()
    kept = keep_readable(raw, A, _sealer(keys))
    assert kept.readable
    assert kept.line.endswith(b"\n")
    assert kept.line != raw
    assert json.loads(kept.line)[SEALED] != json.loads(raw)[SEALED]
    again = keep_readable(kept.line, A, _sealer(keys))  # a retry: already lifted, as it is
    assert (again.line, again.readable) == (kept.line, True)
    assert keep_readable(raw, A, None).readable is False  # no key store: cannot lift, said so

"""``MemoryStore.rows`` seals a row's content and embedding and rotates its embedding under the one data key it
got for the row: it never reads that key back by id. A key read back could be gone already (an erasure shreds
it from another process while this one holds it as the subject's current key): the concurrent late-writer
test failed with ``DataKeyShredded`` in a bypassing write when the embedding's sealing read the key again."""

from __future__ import annotations

import os
import uuid
from typing import Any

from stores.infra.errors import DataKeyShredded
from stores.memory.store import INSERT_COLUMNS, MemoryStore, NewMemory
from stores.privacy.crypto import DataKey, key_id_of

SECRET = b"s" * 32


class _KeysShreddedElsewhere:
    """The subject's current key is held (cached), but its row is already gone: ``get`` by id fails."""

    def __init__(self) -> None:
        self.key = DataKey(uuid.uuid4(), os.urandom(32))

    def current(self, _subject_key: str) -> DataKey:
        return self.key

    def encrypt(self, _subject_key: str, plaintext: bytes, context: bytes = b"") -> tuple[uuid.UUID, bytes]:
        from stores.privacy.crypto import seal

        return self.key.key_id, seal(self.key, plaintext, context)

    def get(self, _key_id: uuid.UUID) -> DataKey:
        raise DataKeyShredded("the data key of this ciphertext has been destroyed")


def test_a_row_is_sealed_and_rotated_under_the_key_it_got_without_reading_it_back() -> None:
    keys: Any = _KeysShreddedElsewhere()
    store = MemoryStore(None, keys, SECRET)  # type: ignore[arg-type]  # rows() touches no connection
    (row,) = store.rows([NewMemory("app", "user-1", "the window seat on the morning train")])
    columns = [c.strip() for c in INSERT_COLUMNS.split(",")]
    values = dict(zip(columns, row, strict=True))
    assert values["key_id"] == keys.key.key_id
    assert key_id_of(values["content_sealed"]) == keys.key.key_id
    assert key_id_of(values["embedding_sealed"]) == keys.key.key_id
    assert values["embedding_rotated"].startswith("[")

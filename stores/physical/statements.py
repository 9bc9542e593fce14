"""What a physical pass did to the bytes, per store, in exact words: the attestation's ``statements``.

A pass's evidence (vacuum counters, compaction revisions) says that it ran after the request's deletions;
it does not say the bytes are gone, and mostly they are not (issue 39): plain ``VACUUM`` marks the dead
tuples' space free and leaves their bytes in the page until a later row reuses it; the WAL keeps every
inserted row until its segment is recycled and overwritten; ``VACUUM FULL`` and a SeaweedFS compaction
write new files and unlink the old ones, whose disk blocks are not overwritten; backups keep everything
until their retention ends. "Sealed, key shredded, space freed" is never "bytes overwritten". So each
physical store states, for the attestation:

- ``done``: what its pass did, and ``bytes_overwritten`` (whether it overwrote the user's bytes: no pass
  here does);
- ``content``: how the user's content is kept in what remains: sealed under the user's data key (shredded
  by an erasure, still live after a forget), or in clear where a writer bypassed sealing;
- ``remains``: each place copies remain (:data:`PLACES`), what they hold and until when;
- ``readable_until``: for sealed copies of an erasure, the key-epoch bound after which no copy of the
  wrapped data key can be unwrapped (``key_unwrappable_by``); until then a copy of the wrapped key (WAL,
  backups) and use of the wrapping KMS key open them.

The words are fixed per store and kind of request: store names, place names and times, nothing personal.
``tests/integration/test_physical_claims.py`` checks them against a raw scan of the database's files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from stores.adapters.interface import Coverage

#: the places a statement names (``Copy.where``); a raw-file scan maps its hits onto them
HEAP_PAGES, TOAST_PAGES, INDEX_PAGES = "heap_pages", "toast_pages", "index_pages"
WAL, ARCHIVES_AND_BACKUPS, UNLINKED_FILES = "wal", "wal_archives_and_backups", "unlinked_files"
VOLUME_FILES, FILER_METADATA, PROVIDER_STORAGE = "volume_files", "filer_metadata", "provider_storage"
UNSTATED = "unstated"
PLACES = (
    HEAP_PAGES,
    TOAST_PAGES,
    INDEX_PAGES,
    WAL,
    ARCHIVES_AND_BACKUPS,
    UNLINKED_FILES,
    VOLUME_FILES,
    FILER_METADATA,
    PROVIDER_STORAGE,
    UNSTATED,
)
UNTIL_REUSED = "the free space is reused by a later row (not bounded: a page may keep them indefinitely)"
UNTIL_RECYCLED = (
    "the segment is recycled and overwritten by later WAL, or removed (after a checkpoint, by the server's "
    "WAL settings)"
)
UNTIL_RETENTION = "their retention ends"
UNTIL_FS_REUSE = "the filesystem reuses the blocks"


@dataclass(frozen=True)
class Copy:
    """One place copies remain: ``where`` (one of :data:`PLACES`), what they hold and until when."""

    where: str
    holds: str
    until: str

    def as_dict(self) -> dict[str, str]:
        return {"where": self.where, "holds": self.holds, "until": self.until}


@dataclass(frozen=True)
class StoreStatement:
    store: str
    done: str
    content: str
    remains: tuple[Copy, ...]
    bytes_overwritten: bool = False
    readable_until: datetime | None = None

    @property
    def places(self) -> set[str]:
        return {c.where for c in self.remains}

    def text(self) -> str:
        """The statement as one paragraph (what the attestation's ``text`` carries)."""
        copies = "; ".join(f"in {c.where.replace('_', ' ')} ({c.holds}) until {c.until}" for c in self.remains)
        out = f"{self.store}: {self.done}. Content: {self.content}. Copies remain: {copies}."
        if self.readable_until is not None:
            out += (
                f" The sealed copies stay readable with a copy of the wrapped data key until "
                f"{self.readable_until.isoformat()}, when no copy of it can be unwrapped any more (the key-epoch "
                "bound; a copy wrapped under the configured key, epoch 0, until that key's deletion is scheduled)."
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "done": self.done,
            "bytes_overwritten": self.bytes_overwritten,
            "content": self.content,
            "remains": [c.as_dict() for c in self.remains],
            "readable_until": self.readable_until.isoformat() if self.readable_until else None,
            "text": self.text(),
        }


@runtime_checkable
class PhysicalStatement(Protocol):
    """A physical clean-up store that states what its pass did to the bytes (``kind``: erasure or forget;
    ``key_unwrappable_by``: an erasure's key-epoch bound)."""

    def statement(self, kind: str, coverage: Coverage, key_unwrappable_by: datetime | None) -> StoreStatement: ...


def sealing(kind: str) -> str:
    """How sealed content stands after a request of ``kind``."""
    if kind == "erasure":
        return "sealed under the user's data key, which the erasure shredded"
    return "sealed under the user's data key, which a forget does not shred (the copies open with it)"


def readable_until(kind: str, key_unwrappable_by: datetime | None) -> datetime | None:
    return key_unwrappable_by if kind == "erasure" else None


def unstated(store: str) -> StoreStatement:
    """For a physical store that states nothing: nothing is claimed beyond its evidence."""
    return StoreStatement(
        store,
        "the store does not state what its pass did to the bytes: only its evidence is attested",
        "not stated",
        (Copy(UNSTATED, "not stated", "not stated"),),
    )


def statement_of(
    store: str, adapter: object, kind: str, coverage: Coverage, key_unwrappable_by: datetime | None
) -> StoreStatement:
    if isinstance(adapter, PhysicalStatement):
        return adapter.statement(kind, coverage, key_unwrappable_by)
    return unstated(store)


def keys_statement(keys_table: Mapping[str, str], key_unwrappable_by: datetime | None) -> StoreStatement:
    """The keys table after an erasure: the keys step deleted the user's wrapped data key rows; the job's
    ``physical_keys`` (``KeyEpochs.compact``) rewrote ``data_keys`` and switched the WAL, or did not
    (``refused``: no privilege; ``off``), as ``keys_table`` says."""
    rewritten = keys_table.get("vacuum_full") == "done"
    switched = keys_table.get("switch_wal") == "done" and keys_table.get("checkpoint") == "done"
    key = "the user's data key, wrapped under the KMS key of its epoch"
    if rewritten:
        done = (
            "the wrapped data key rows deleted by the keys step; data_keys rewritten by VACUUM FULL into new "
            "files (the old files unlinked, their bytes not overwritten)"
        )
        remains = [Copy(UNLINKED_FILES, key, UNTIL_FS_REUSE)]
    else:
        why = keys_table.get("vacuum_full", "off")
        done = f"the wrapped data key rows deleted by the keys step; data_keys not rewritten (VACUUM FULL {why})"
        remains = [Copy(HEAP_PAGES, key, "vacuumed and " + UNTIL_REUSED)]
    if switched:
        done += "; the WAL switched and checkpointed (the segments holding the wrapped key became removable)"
    else:
        done += f"; the WAL not switched (switch_wal {keys_table.get('switch_wal', 'off')})"
    remains += [Copy(WAL, key, UNTIL_RECYCLED), Copy(ARCHIVES_AND_BACKUPS, key, UNTIL_RETENTION)]
    bound = (
        f"no copy can be unwrapped from {key_unwrappable_by.isoformat()}" if key_unwrappable_by else "no bound stated"
    )
    return StoreStatement(
        "keys",
        done,
        f"{key}: a copy and use of that KMS key unwrap it; {bound}",
        tuple(remains),
        readable_until=None,
    )

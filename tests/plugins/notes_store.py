"""A throwaway store and its adapter, registered by a test through the entry point like a platform's own.

The store: note files on disk, one folder per subject (``<root>/<app>/<subject key>/<note id>.txt``), the
root taken from ``NOTES_STORE_DIR``. The adapter erases them 10 per batch, resuming from its cursor; its
``remaining`` reads the folder with its own listing; its sweep removes notes older than the erasure. Every
delete goes through the one gate (``gated``: the owner's hold read, under its hold lock, batch by batch), as
docs/adding-a-store.md asks of a store's destructive primitive.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from stores.adapters.context import StoreContext
from stores.adapters.interface import Beat, Bound, Remaining, Subject, Swept
from stores.books.request_record import RequestRecord
from stores.ledgers.owner_holds import gated
from stores.platform import Platform
from stores.privacy.identity import key_part, subject_key

BATCH = 10


def notes_root() -> Path:
    return Path(os.environ["NOTES_STORE_DIR"])


def folder(app_name: str, subject: str) -> Path:
    return notes_root() / key_part(app_name) / subject


def write_note(platform: Platform, app_name: str, user_id: str, text: str) -> Path:
    """What the agent platform does: file one note under the user's subject key."""
    path = folder(app_name, subject_key(platform.config.subject_secret, app_name, user_id)) / f"{uuid.uuid4()}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class NotesAdapter:
    name = "notes"
    after: tuple[str, ...] = ("memory",)
    batched = True

    def __init__(self, context: StoreContext) -> None:
        self.context = context  # what every adapter's factory is given (``stores.adapters.context``)

    def locate(self, subject: Subject) -> dict[str, int]:
        where = folder(subject.app_name, subject.subject_key)
        return {"notes": len(list(where.glob("*.txt"))) if where.is_dir() else 0}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        removed = int(cursor.get("removed", 0))
        where = folder(subject.app_name, subject.subject_key)
        files = sorted(where.glob("*.txt")) if where.is_dir() else []
        for start in range(0, len(files), BATCH):
            with gated(self.context.pool, [subject.subject_key]):
                for path in files[start : start + BATCH]:
                    path.unlink(missing_ok=True)
                    removed += 1
            beat({"removed": removed})
        return {"notes": removed}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        where = notes_root() / key_part(subject.app_name) / subject.subject_key
        left = 0
        if where.is_dir():
            with os.scandir(where) as entries:
                for entry in entries:
                    dated = datetime.fromtimestamp(entry.stat().st_mtime).astimezone()
                    if bound is None or dated < bound.erased_at:
                        left += 1
        return Remaining({"notes": left})

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        where = folder(subject.app_name, subject.subject_key)
        removed = 0
        with gated(self.context.pool, [subject.subject_key]):
            for path in sorted(where.glob("*.txt")) if where.is_dir() else []:
                dated = datetime.fromtimestamp(path.stat().st_mtime).astimezone()
                if before is None or dated < before:
                    path.unlink(missing_ok=True)
                    removed += 1
        return Swept({"notes": removed})

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        where = folder(app_name, subject_key(self.context.subject_secret, app_name, user_id))
        files = sorted(where.glob("*.txt")) if where.is_dir() else []
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode() + hashlib.sha256(path.read_bytes()).digest())
        return {"notes": digest.hexdigest(), "counts": {"notes": len(files)}}

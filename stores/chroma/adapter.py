"""Adapter for the Chroma memory backend (``stores.chroma.collection``): the subject's own Chroma database.

Erase counts the subject's memories, reports the count in a heartbeat, then removes the subject's whole
database directory (its SQLite file and HNSW index files): the only way to leave nothing of the user in
Chroma's files, as the store module explains. It is idempotent: a retry finds the directory gone, or
removes what is left of it, and reports the count of the attempt that dropped it. Remaining looks at the
disk on its own: every file left under the subject's directory fails the check (the directory computed
from the subject key, not taken from the eraser), and a completed request's re-check counts the items
dated before the erasure in a database written again since, read from the SQLite file opened read-only.
A sweep dated ``before`` removes the database when all of it predates the erasure, else rebuilds it from
the items written afterwards (a per-item ``delete`` would leave the vectors in the index files).

``forget_items`` (item forgetting and session erasure) works the same way: the items a forget covers (by id,
by the tombstone's spans or whole texts, or derived from one of those within the subject's database), and
for a session erasure the items of that session alone, go; an item whose ``sessions`` also names a kept
session stays and loses the erased one. Anything changed, the database is rebuilt from what stays (a
per-item ``delete`` is soft), under the same rotation key.

Every removal is gated on the database's owner, the subject its directory is named after
(``stores.ledgers.owner_holds.gated``, in ``_replace``): the directory goes, and a rebuild writes what stays,
while the owner's hold lock is held shared in a transaction that read the owner's hold; a hold (``OwnerHeld``)
stops it before anything is removed, and the erase, the sweep or the forget ends ``held``.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.adapters.interface import Beat, Bound, DataClaims, Disposition, ForgetScope, Remaining, Subject, Swept
from stores.chroma.collection import COLLECTION, ROTATION_KEY, shared_memory
from stores.infra.errors import DataKeyShredded
from stores.ledgers.owner_holds import gated
from stores.privacy.identity import subject_key

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord
    from stores.chroma.collection import ChromaMemory


class ChromaReads:
    """The verifier's reads: the subject's directory tree, and its SQLite file opened read-only."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _directory(self, subject: str) -> Path:
        hexpart = subject[3:]
        return self.root / hexpart[:2] / ("mem-" + hexpart)

    def files_left(self, subject: str) -> int:
        directory = self._directory(subject)
        return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0

    def items_before(self, subject: str, before: datetime) -> int:
        db = self._directory(subject) / "chroma.sqlite3"
        if not db.is_file():
            return 0
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30.0)
        try:
            row = conn.execute(
                "SELECT count(*) FROM embedding_metadata WHERE key = 'created_at' AND float_value < ?",
                (before.timestamp(),),
            ).fetchone()
        finally:
            conn.close()
        return int(row[0])


class ChromaMemoryAdapter:
    name = "chroma_memory"
    after: tuple[str, ...] = ()
    batched = True
    disposition = Disposition(
        "deleted",
        "the subject's database directory removed whole; copies outside it (backups, another file's free "
        "space) hold documents sealed and embeddings under the user's rotation, key destroyed",
    )

    def __init__(self, context: StoreContext) -> None:
        self.store: ChromaMemory = shared_memory(context)  # AdapterNotConfigured when the platform has none
        self.pool = context.pool  # the hold store: every removal reads the owner's hold (``_replace``)
        self.requests, self.secret = context.requests, context.subject_secret
        self.reads = ChromaReads(self.store.path)

    def locate(self, subject: Subject) -> dict[str, int]:
        return {"chroma_memories": self.store.count(subject.subject_key)}

    def _record(self, subject: Subject) -> None:
        """The request notes that this step ran and which directory it removed (the check's input)."""
        if not subject.request_id:
            return
        name = self.store.directory(subject.subject_key).name

        def add(r: RequestRecord) -> RequestRecord:
            found = dict(r.erased_refs or {})
            found[self.name] = sorted({*found.get(self.name, []), name})
            return replace(r, erased_refs=found)

        self.requests.update_record(subject.request_id, add)

    def _drop(self, subject: Subject, beat: Beat | None) -> int:
        """Remove the subject's database directory; the memories it held."""
        items = self.store.count(subject.subject_key)
        if beat:
            beat({"dropped": items})  # a retry that finds the directory gone reports this count
        self._replace(subject.subject_key)
        return items

    def _replace(self, sk: str, kept: Sequence[tuple[Any, ...]] = (), rotation_key: str | None = None) -> None:
        """The store's one gated change: the subject's database directory removed, then rebuilt from ``kept``
        (id, vector, document, metadata) when anything stays, all under the owner's hold gate (``OwnerHeld``
        before anything goes when the subject is held; a hold being placed waits for the rebuild)."""
        directory = self.store.directory(sk)
        with gated(self.pool, [sk]):
            with self.store.lock(sk):
                if directory.exists():
                    shutil.rmtree(directory)
            if kept:  # rebuilt from what stays: a per-item delete leaves vectors and documents in the files
                with self.store.opened(sk, create=True, rotation_key=rotation_key) as again:
                    assert again is not None
                    again.add(
                        ids=[k[0] for k in kept],
                        embeddings=[k[1] for k in kept],
                        documents=[k[2] for k in kept],
                        metadatas=[k[3] for k in kept],
                    )

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        self._record(subject)
        found = self._drop(subject, beat)  # what a cut attempt counted, if its directory is still there
        return {"chroma_memories": found or int(cursor.get("dropped", 0))}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        if self.name not in (record.erased_refs or {}):
            return Remaining(missing=("the Chroma step's record that it ran",))
        if not self.reads.root.is_dir():
            return Remaining(missing=("the Chroma backend's root directory",))
        if bound is not None:  # written again since the erasure is fine; dated before it is a leftover
            return Remaining({"items_before_erasure": self.reads.items_before(subject.subject_key, bound.erased_at)})
        return Remaining({"files_on_disk": self.reads.files_left(subject.subject_key)})

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        if before is None:
            return Swept({"chroma_memories": self._drop(subject, None)})
        cutoff = before.timestamp()
        with self.store.opened(subject.subject_key, create=False) as col:
            if col is None:
                return Swept({"chroma_memories": 0})
            old = col.get(where={"created_at": {"$lt": cutoff}}, include=[])["ids"]
            rotation_key = (col.metadata or {}).get(ROTATION_KEY)
            kept = col.get(where={"created_at": {"$gte": cutoff}}, include=["embeddings", "documents", "metadatas"])
        if not old:
            return Swept({"chroma_memories": 0})
        # rebuilt from what was written after the erasure: a per-item delete is soft
        after = list(zip(kept["ids"], kept["embeddings"], kept["documents"], kept["metadatas"], strict=True))
        self._replace(subject.subject_key, after, rotation_key)
        return Swept({"chroma_memories": len(old)})

    def _text(self, item: str, document: str) -> str:
        try:
            return self.store.open_document(item, document)
        except DataKeyShredded:  # unreadable for good: matched by id only
            return ""

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """Forget what ``scope`` covers in the subject's database (see the module); idempotent: a retry finds
        nothing covered left. Counts: items removed, items kept that lost the erased session."""
        sk = scope.subject_key
        with self.store.opened(sk, create=False) as col:
            if col is None:
                return {"chroma_memories": 0, "chroma_detached": 0}
            rotation_key = (col.metadata or {}).get(ROTATION_KEY)
            got = col.get(include=["embeddings", "documents", "metadatas"])
        items = list(zip(got["ids"], got["embeddings"], got["documents"], got["metadatas"], strict=True))
        going: set[str] = set()
        detached: dict[str, dict[str, Any]] = {}
        summaries: set[str] = set()  # a summary's sessions are its sources': kept only if none of them goes
        for item, _vector, document, meta in items:
            sessions = [r for r in str(meta.get("sessions") or "").split(",") if r]
            if scope.session_ref is not None and scope.session_ref in sessions:
                rest = [r for r in sessions if r != scope.session_ref]
                if rest:
                    detached[item] = {**meta, "sessions": ",".join(rest)}
                    if meta.get("kind") == "summary":
                        summaries.add(item)
                else:
                    going.add(item)
                continue
            if item in scope.memory_ids or scope.covers(item, self._text(item, document)):
                going.add(item)
        parents = {item: {d for d in str(meta.get("derived_from") or "").split(",") if d} for item, *_r, meta in items}
        grown = True
        while grown:  # derived within the database from an item that goes (a kept session's own item stays)
            gone = going | set(scope.memory_ids)
            more = {
                i for i, ds in parents.items() if i not in going and (i not in detached or i in summaries) and ds & gone
            }
            grown = bool(more)
            going |= more
            for i in more:
                detached.pop(i, None)
        if not going and not detached:
            return {"chroma_memories": 0, "chroma_detached": 0}
        beat({"chroma_forgetting": len(going)})
        kept = [(i, v, d, detached.get(i, m)) for i, v, d, m in items if i not in going]
        self._replace(sk, kept, rotation_key)
        return {"chroma_memories": len(going), "chroma_detached": len(detached)}

    def items_left(self, scope: ForgetScope) -> int:
        """The subject's items the forget still covers: naming the erased session, by id, by the tombstone's
        spans or texts, or derived from a forgotten id (read from the database as it is)."""
        with self.store.opened(scope.subject_key, create=False) as col:
            if col is None:
                return 0
            got = col.get(include=["documents", "metadatas"])
        left = 0
        for item, document, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            named = scope.session_ref is not None and scope.session_ref in str(meta.get("sessions") or "").split(",")
            parents = set(str(meta.get("derived_from") or "").split(","))
            if (
                named
                or item in scope.memory_ids
                or parents & scope.memory_ids
                or scope.covers(item, self._text(item, document))
            ):
                left += 1
        return left

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        sk = subject_key(self.secret, app_name, user_id)
        digest = hashlib.sha256()
        count = 0
        with self.store.opened(sk, create=False) as col:
            if col is not None:
                got = col.get(include=["embeddings", "documents", "metadatas"])
                rows = zip(got["ids"], got["embeddings"], got["documents"], got["metadatas"], strict=True)
                for item, vector, doc, meta in sorted(rows, key=lambda r: r[0]):
                    digest.update(f"{item}|{[float(v) for v in vector]}|{doc}|{sorted(meta.items())}".encode())
                    count += 1
        return {"chroma_memory": digest.hexdigest(), "counts": {"chroma_memories": count}}

    def claims(self) -> DataClaims:
        """The data map: the one collection in every subject's Chroma database."""
        return DataClaims(collections=(f"chroma/{COLLECTION}",))

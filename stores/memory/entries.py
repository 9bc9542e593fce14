"""ADK ``MemoryEntry`` writes as memory rows: what a write says about itself in its metadata.

``add_memory`` callers describe each entry in ``custom_metadata`` (or once for the call); an entry's own keys
win. Keys: ``purpose`` (required), ``retention`` (a retention class), ``tier`` (episode, semantic, procedure)
or ``kind``, ``source`` (user, tool, inference, document, system), ``source_ref``, ``basis`` (stated,
confirmed, observed, inferred), ``importance`` (0..1), ``pinned``, ``supersedes`` (ids the write corrects),
``contradicts`` (ids it disputes), ``session_id``. A value that cannot be read makes the entry a refusal
(``bad_lifecycle``), never an exception in the agent's turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from stores.memory.capture import Capture
from stores.memory.lifecycle_rules import TIER_KIND, tier_of
from stores.memory.store import NewMemory

if TYPE_CHECKING:
    from google.adk.memory.memory_entry import MemoryEntry
    from google.genai import types


def content_text(content: types.Content | None) -> str:
    if content is None or not content.parts:
        return ""
    return " ".join(p.text for p in content.parts if p.text)


def entry_time(entry: MemoryEntry) -> datetime | None:
    """``MemoryEntry.timestamp`` (ISO 8601) as an aware time, if it is one."""
    if not entry.timestamp:
        return None
    try:
        at = datetime.fromisoformat(entry.timestamp)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _ids(value: object) -> list[uuid.UUID]:
    items = value if isinstance(value, list | tuple) else [value] if value else []
    return [uuid.UUID(str(v)) for v in items]


def capture_of(m: NewMemory) -> Capture:
    return Capture(m.purpose, m.retention_class, m.tier, m.source_kind, m.confidence_basis)


def entry_memory(
    app_name: str, user_id: str, entry: MemoryEntry, call_meta: Mapping[str, object] | None = None
) -> NewMemory | str:
    """The row an entry asks for, or the refusal reason when its metadata cannot be read."""
    meta = {**(call_meta or {}), **(entry.custom_metadata or {})}
    try:
        tier = str(meta["tier"]) if "tier" in meta else tier_of(str(meta.get("kind", "fact")))
        kind = str(meta.get("kind") or TIER_KIND[tier])
        importance = meta.get("importance")
        session_id = meta.get("session_id")
        return NewMemory(
            app_name=app_name,
            user_id=user_id,
            text=content_text(entry.content),
            kind=kind,
            session_id=str(session_id) if session_id else None,
            author=entry.author,
            created_at=entry_time(entry),
            purpose=str(meta.get("purpose") or "").strip(),
            retention_class=str(meta.get("retention", "until_withdrawn")),
            source_kind=str(meta.get("source", "user")),
            source_ref=str(meta["source_ref"]) if meta.get("source_ref") else None,
            confidence_basis=str(meta.get("basis", "stated")),
            importance=float(str(importance)) if importance is not None else None,
            pinned=bool(meta.get("pinned", False)),
            supersedes=_ids(meta.get("supersedes")),
            challenged_by=_ids(meta.get("contradicts")),
        )
    except (KeyError, ValueError, TypeError):
        return "bad_lifecycle"

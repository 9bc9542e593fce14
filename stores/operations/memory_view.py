"""What is remembered about one user, shaped for an operator (``erasure memory show``) and as an export.

For a data-subject access question: every row of the subject (by the subject key index), opened with the
user's data key (a row whose key is shredded is listed as unreadable, never an error), with why it is held
(purpose, retention class, expiry), where it came from (source kind and reference, source sessions,
provenance ids), its state and links (superseded by, challenged by), its confidence now and where it may be
used; then the rows filed under *other* subjects that were derived from this user's rows (ids only: their
text is someone else's) and the live forget tombstones (counts and strengths: tombstones hold no text).

Nothing here logs: the view holds the user's words and goes to the person who asked for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg_pool import ConnectionPool

from stores.infra.errors import DataKeyShredded
from stores.ledgers.forget_tombstones import ForgetTombstone, TombstoneMatcher
from stores.memory.lifecycle_rules import tier_of, use_of
from stores.memory.states import HeldMemory, derived_closure
from stores.platform import Platform

FORMAT = "erasure.memory-view/1"
LIVE_STATES = ("active", "challenged")


def use_now(state: str, expires_at: datetime | None, confidence_now: float, now: datetime) -> str:
    """Where a row may be used now: ``preload``, ``search`` or ``review`` (stores.memory.lifecycle_rules.use_of);
    ``none`` for a retired row (superseded, deleted) or one past its expiry. A challenged belief is never
    preloaded (it is not settled)."""
    if state not in LIVE_STATES or (expires_at is not None and expires_at <= now):
        return "none"
    use = use_of(confidence_now)
    return "search" if state == "challenged" and use == "preload" else use


@dataclass(frozen=True)
class MemoryView:
    app_name: str
    user_id: str
    subject_key: str
    generated_at: datetime
    memories: list[HeldMemory]
    derived_by_others: list[str]  # ids of rows filed under other subjects, drawn from this user's rows
    tombstones: list[ForgetTombstone]

    def by_purpose(self) -> list[tuple[str, list[HeldMemory]]]:
        groups: dict[str, list[HeldMemory]] = {}
        for m in self.memories:
            groups.setdefault(m.purpose, []).append(m)
        return sorted(groups.items())

    def state_counts(self) -> dict[str, int]:
        counts = {"active": 0, "challenged": 0, "superseded": 0, "deleted": 0}
        for m in self.memories:
            counts[m.state] = counts.get(m.state, 0) + 1
        return counts

    @property
    def unreadable(self) -> int:
        return sum(1 for m in self.memories if m.text is None)

    def tombstone_strengths(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tombstones:
            out[t.strength] = out.get(t.strength, 0) + 1
        return dict(sorted(out.items()))


def _open(platform: Platform, row_id: uuid.UUID, sealed: bytes) -> str | None:
    try:
        return platform.memory_store.decrypt_row(row_id, sealed)
    except DataKeyShredded:
        return None


def _held(row: tuple[Any, ...], text: str | None, matcher: TombstoneMatcher, now: datetime) -> HeldMemory:
    (rid, kind, _sealed, purpose, retention, expires_at, source_kind, source_ref, sessions, derived) = row[:10]
    (basis, confidence, state, supersedes, superseded_by, pinned, importance, hits, created, accessed) = row[10:20]
    rid_s = str(rid)
    return HeldMemory(
        id=rid_s,
        tier=tier_of(str(kind)),
        kind=str(kind),
        text=text,
        purpose=str(purpose),
        retention_class=str(retention),
        expires_at=expires_at,
        source_kind=str(source_kind),
        source_ref=source_ref,
        source_sessions=[str(s) for s in sessions],
        derived_from=[str(d) for d in derived],
        confidence_basis=str(basis),
        confidence_now=float(confidence),
        state=str(state),
        supersedes=[str(s) for s in supersedes],
        superseded_by=str(superseded_by) if superseded_by else None,
        pinned=bool(pinned),
        importance=float(importance),
        hits=int(hits),
        created_at=created,
        last_accessed_at=accessed,
        challenged_by=[str(c) for c in row[20]] if len(row) > 20 else [],
        use=use_now(str(state), expires_at, float(confidence), now),
        hidden=bool(matcher) and matcher.covers(rid_s, text or ""),
    )


def derived_by_others(pool: ConnectionPool, subject_key: str, own: Sequence[HeldMemory]) -> list[str]:
    """Rows under other subjects drawn from the subject's rows: through ``derived_from`` (transitively, the
    provenance GIN index) or naming one of the subject's sessions in ``source_sessions`` (its GIN index)."""
    ids = [uuid.UUID(m.id) for m in own]
    refs = sorted({s for m in own for s in m.source_sessions if s.startswith(f"{subject_key}:")})
    with pool.connection() as conn:
        derived = derived_closure(conn, ids) if ids else []
        rows = conn.execute(
            "SELECT id FROM memories WHERE id = ANY(%s) AND subject_key <> %s "
            "UNION SELECT id FROM memories WHERE source_sessions && %s::text[] AND subject_key <> %s",
            (derived, subject_key, refs, subject_key),
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def memory_view(platform: Platform, app_name: str, user_id: str, subject_key: str) -> MemoryView:
    """Everything remembered about the subject (already validated: ``workers.service.validate_request``)."""
    now = datetime.now(UTC)
    tombstones = platform.forgetting.live(subject_key)
    matcher = TombstoneMatcher(platform.config.subject_secret, tombstones, frozenset({"suppress", "forget"}))
    memories = [
        _held(row, _open(platform, row[0], bytes(row[2])), matcher, now)
        for row in platform.memory_states.held(subject_key)
    ]
    return MemoryView(
        app_name=app_name,
        user_id=user_id,
        subject_key=subject_key,
        generated_at=now,
        memories=memories,
        derived_by_others=derived_by_others(platform.pool, subject_key, memories),
        tombstones=tombstones,
    )


# ----- export --------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def memory_record(m: HeldMemory) -> dict[str, Any]:
    """One row of the export (stable keys, ISO 8601 times in UTC; ``text`` null when unreadable)."""
    return {
        "id": m.id,
        "tier": m.tier,
        "kind": m.kind,
        "readable": m.text is not None,
        "text": m.text,
        "why": {"purpose": m.purpose, "retention_class": m.retention_class, "expires_at": _iso(m.expires_at)},
        "source": {
            "kind": m.source_kind,
            "ref": m.source_ref,
            "sessions": len(m.source_sessions),
            "derived_from": list(m.derived_from),
        },
        "state": {
            "state": m.state,
            "supersedes": list(m.supersedes),
            "superseded_by": m.superseded_by,
            "challenged_by": list(m.challenged_by),
            "hidden_by_tombstone": m.hidden,
        },
        "confidence": {"basis": m.confidence_basis, "now": round(m.confidence_now, 4), "use": m.use},
        "pinned": m.pinned,
        "importance": round(m.importance, 4),
        "hits": m.hits,
        "created_at": _iso(m.created_at),
        "last_accessed_at": _iso(m.last_accessed_at),
    }


def export(view: MemoryView) -> dict[str, Any]:
    """The whole view as one JSON-ready document (``erasure memory show --json``)."""
    return {
        "format": FORMAT,
        "app": view.app_name,
        "user": view.user_id,
        "subject_key": view.subject_key,
        "generated_at": _iso(view.generated_at),
        "counts": {"memories": len(view.memories), "unreadable": view.unreadable, "states": view.state_counts()},
        "purposes": [
            {"purpose": purpose, "count": len(rows), "memories": [memory_record(m) for m in rows]}
            for purpose, rows in view.by_purpose()
        ],
        "derived_by_others": {"count": len(view.derived_by_others), "ids": list(view.derived_by_others)},
        "forget_tombstones": {
            "count": len(view.tombstones),
            "strengths": view.tombstone_strengths(),
            "ids": [t.id for t in view.tombstones],
        },
    }

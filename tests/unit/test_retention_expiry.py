"""Retention expiry's pure parts: a page grouped per (subject, app), and the deterministic request id."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from stores.lifecycle.retention_expiry import expiry_request_id, grouped
from stores.memory.states import ExpiredRow

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _row(sk: str, app: str) -> ExpiredRow:
    return ExpiredRow(sk, app, str(uuid.uuid4()), NOW)


def test_a_page_is_grouped_per_subject_and_app_in_first_seen_order() -> None:
    a1, b1, a2, a_other_app = _row("sk_a", "x"), _row("sk_b", "x"), _row("sk_a", "x"), _row("sk_a", "y")
    groups = grouped([a1, b1, a2, a_other_app])
    assert [(sk, app) for sk, app, _ids in groups] == [("sk_a", "x"), ("sk_b", "x"), ("sk_a", "y")]
    assert groups[0][2] == sorted([a1.id, a2.id])
    assert grouped([]) == []


def test_the_request_id_names_the_rows_not_their_order() -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    rid = expiry_request_id("sk_a", "x", ids)
    assert rid == expiry_request_id("sk_a", "x", list(reversed(ids)))
    assert rid == expiry_request_id("sk_a", "x", [i.upper() for i in ids])  # one spelling of each id
    assert rid.startswith("fr_")
    assert len(rid) == 23
    assert rid != expiry_request_id("sk_b", "x", ids)
    assert rid != expiry_request_id("sk_a", "y", ids)
    assert rid != expiry_request_id("sk_a", "x", ids[:2])
    assert rid != expiry_request_id("sk_a", "x", ids, generation=1)

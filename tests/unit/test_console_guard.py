"""Deny by default: a console route that declares no permission stops the app from being built."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import pytest
from fastapi import Depends, FastAPI

from console.app import PERMISSIONS, assert_every_route_guarded, require
from console.audit import GENESIS, entry_hash
from console.identity import ROLES, Principal, actor_ref


def test_a_route_without_a_permission_is_refused_at_start() -> None:
    app = FastAPI()

    @app.get("/api/open")
    async def open_route() -> dict[str, str]:
        return {}

    with pytest.raises(RuntimeError, match="/api/open declares no permission"):
        assert_every_route_guarded(app)


def test_a_guarded_route_passes() -> None:
    app = FastAPI()

    @app.get("/api/closed")
    async def closed(p: Annotated[Principal, Depends(require("audit:read"))]) -> dict[str, str]:
        return {}

    assert_every_route_guarded(app)


def test_every_permission_names_known_roles_only() -> None:
    assert all(roles and roles <= set(ROLES) for roles in PERMISSIONS.values())


def test_actor_refs_are_keyed_and_distinct() -> None:
    a, b = actor_ref(b"k" * 32, "rita@x.example"), actor_ref(b"k" * 32, "amir@x.example")
    assert a != b
    assert a.startswith("act_")
    assert "rita" not in a
    assert actor_ref(b"j" * 32, "rita@x.example") != a


def test_an_audit_hash_covers_every_field_and_the_link() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    base = entry_hash(GENESIS, 1, at, "rita", "filed", "er_1", {"subject_key": "sk_1"})
    assert base == entry_hash(GENESIS, 1, at, "rita", "filed", "er_1", {"subject_key": "sk_1"})
    changed = [
        entry_hash("1" * 64, 1, at, "rita", "filed", "er_1", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 2, at, "rita", "filed", "er_1", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 1, at.replace(second=1), "rita", "filed", "er_1", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 1, at, "amir", "filed", "er_1", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 1, at, "rita", "denied", "er_1", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 1, at, "rita", "filed", "er_2", {"subject_key": "sk_1"}),
        entry_hash(GENESIS, 1, at, "rita", "filed", "er_1", {"subject_key": "sk_2"}),
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)


def test_the_temporal_ui_proxy_never_forwards_the_console_session() -> None:
    from console.temporal_ui import _forwarded_cookie

    header = "_csrf=abc; erasure_console=SESSION; theme=dark; erasure_console_x=keep"
    assert _forwarded_cookie(header) == "_csrf=abc; theme=dark; erasure_console_x=keep"
    assert _forwarded_cookie("erasure_console=SESSION") == ""

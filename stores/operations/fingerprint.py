"""Per-user fingerprints of every store, read directly: each registered adapter's ``fingerprint``.

Used to show that users other than the erased one stay byte-identical (demo, tests). Reads by indexed
lookups per user; meant for a handful of users, not the whole platform.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stores.platform import Platform


def user_snapshot(platform: Platform, app: str, user: str) -> dict[str, Any]:
    """One digest per kind of object of the user in every store, and their ``counts``."""
    out: dict[str, Any] = {"counts": {}}
    for adapter in platform.adapters.in_order():
        part = dict(adapter.fingerprint(app, user))
        out["counts"].update(part.pop("counts", {}))
        out.update(part)
    return out


def snapshot(platform: Platform, app: str, users: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {u: user_snapshot(platform, app, u) for u in users}

"""The pool's checkout check: skipped for a connection back from use a moment ago, sent otherwise."""

from __future__ import annotations

import time

import pytest

from stores.infra.pool_check import RecentlyUsedCheck


class Conn:
    autocommit = True

    def __init__(self, alive: bool = True) -> None:
        self.alive = alive
        self.sent: list[str] = []

    def execute(self, query: str) -> None:
        self.sent.append(query)
        if not self.alive:
            raise OSError("server closed the connection")


def test_a_new_connection_is_checked_and_a_dead_one_refused() -> None:
    check = RecentlyUsedCheck()
    fresh, dead = Conn(), Conn(alive=False)
    check.check(fresh)
    assert fresh.sent == [""]
    with pytest.raises(OSError, match="server closed"):
        check.check(dead)


def test_a_connection_just_returned_is_not_checked_and_an_idle_one_is() -> None:
    check = RecentlyUsedCheck(recent_seconds=0.2)
    conn = Conn()
    check.reset(conn)
    check.check(conn)
    assert conn.sent == []  # back from use a moment ago
    time.sleep(0.25)
    check.check(conn)
    assert conn.sent == [""]  # idle longer than the window: checked again
    assert check.checked == 1

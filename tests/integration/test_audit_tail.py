"""Issue 40 item 3: an audit log nobody can shorten, against the real stack (Postgres and SeaweedFS).

The table's owner turned the append-only trigger off, deleted the tail (or every entry) and turned it back
on: ``verify`` said broken until the next audited action (even a refused call) appended, chained to
whatever row was last and overwrote the one anchor, after which it said intact. Now an append refuses
(and alerts) when the table's last entry is not the anchored head; anchors are one immutable object per
append, so a wipe cannot be hidden under a new anchor for a lower entry; ``verify`` checks every anchor and
names the first entry that does not match; and the audit code runs as a role that cannot delete entries
nor turn the trigger off.

Every test puts the table back as it found it: the log is shared by the whole session.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from structlog.testing import capture_logs

from console.audit import AuditEntry, AuditLog, entry_hash
from tests.console_harness import Api
from tests.saga_harness import cli

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

ROLE = "erasure_audit_writer"
COLUMNS = "seq, at, actor, action, request_id, detail, prev_hash, hash, mac_version"
TESTER = "tail-tester@compliance.example"


def _audit(api: Api) -> AuditLog:
    log: AuditLog = api.app.state.console.audit
    return log


@contextmanager
def _as_owner(api: Api) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the table's owner with the append-only trigger off (what the attack needs)."""
    with api.saga.platform.pool.connection() as conn:
        conn.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only")
        try:
            yield conn
        finally:
            conn.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only")


def _rows_from(api: Api, seq: int) -> list[tuple[Any, ...]]:
    with api.saga.platform.pool.connection() as conn:
        rows: list[tuple[Any, ...]] = conn.execute(
            f"SELECT {COLUMNS} FROM audit_log WHERE seq >= %s ORDER BY seq", (seq,)
        ).fetchall()
    return rows


def _put_back(api: Api, seq: int, saved: list[tuple[Any, ...]]) -> None:
    """Entries from ``seq`` on exactly as they were (anything appended since removed first)."""
    with _as_owner(api) as conn:
        conn.execute("DELETE FROM audit_log WHERE seq >= %s", (seq,))
        for r in saved:
            conn.execute(
                f"INSERT INTO audit_log ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (*r[:5], Jsonb(r[5]), *r[6:]),
            )


def _count(api: Api) -> int:
    with api.saga.platform.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM audit_log").fetchone()
    assert row is not None
    return int(row[0])


async def _refused_call(api: Api) -> BaseException | None:
    """A requester reading the audit log: refused with 403, and the refusal is itself audited."""
    try:
        reply = await api.http.get("/api/audit", headers=api.bearer("nosy-4003@compliance.example", "requester"))
    except Exception as exc:  # the app's exception, raised through the in-process transport
        return exc
    assert reply.status_code == 403
    return None


def _fresh_entries(api: Api, n: int) -> int:
    """Append ``n`` entries; returns the first one's seq."""
    first = _audit(api).append(TESTER, "token_created", None, {"token_id": "tail-0"}).seq
    for i in range(1, n):
        _audit(api).append(TESTER, "token_created", None, {"token_id": f"tail-{i}"})
    return first


async def test_a_deleted_tail_stays_caught_after_further_audited_actions(api: Api) -> None:
    audit = _audit(api)
    cut_from = _fresh_entries(api, 4) + 2  # the last two of them go
    assert audit.verify().ok
    saved = _rows_from(api, cut_from)
    assert len(saved) == 2
    try:
        with _as_owner(api) as conn:
            conn.execute("DELETE FROM audit_log WHERE seq >= %s", (cut_from,))
        assert not audit.verify().ok  # the old code said broken here too ...
        before = _count(api)
        with capture_logs() as logs:
            outcome = await _refused_call(api)  # ... until any audited action appended
        after = audit.verify()
        assert not after.ok, after  # the old code: intact
        assert "entries removed" in after.why
        assert after.first_bad_seq == cut_from

        from console.audit import AuditChainBroken

        assert isinstance(outcome, AuditChainBroken), outcome  # the append refused ...
        assert _count(api) == before  # ... and wrote nothing
        with pytest.raises(AuditChainBroken, match="not the anchored head"):
            audit.append(TESTER, "token_revoked", None, {"token_id": "tail-x"})
        alerts = [e for e in logs if e.get("event") == "audit_append_refused"]
        assert alerts, logs
        assert alerts[0]["log_level"] == "error"
        assert alerts[0]["table_last_seq"] == cut_from - 1
        assert alerts[0]["anchored_seq"] == cut_from + 1
        assert "nosy-4003" not in repr(alerts)  # who was refused is not the alert's business
        code, out, _err = await cli(api.saga, "127.0.0.1:1", "audit", "verify")  # the operator's check
        assert code == 4
        assert f"audit log BROKEN at entry {cut_from}: entry {cut_from} is missing" in out
    finally:
        _put_back(api, cut_from, saved)
    assert audit.verify().ok  # the tail restored: the anchors are reached again, appends go on
    audit.append(TESTER, "token_revoked", None, {"token_id": "tail-after"})
    assert audit.verify().ok


async def test_a_wiped_table_stays_caught_after_a_further_append(api: Api) -> None:
    audit = _audit(api)
    _fresh_entries(api, 2)
    saved = _rows_from(api, 0)
    try:
        with _as_owner(api) as conn:
            conn.execute("DELETE FROM audit_log")
        appended: BaseException | None = None
        try:
            audit.append(TESTER, "token_created", None, {"token_id": "after-wipe"})
        except Exception as exc:
            appended = exc
        after = audit.verify()
        assert not after.ok, after  # the old code: intact, one entry, a new anchor for entry 1
        assert "entries removed" in after.why
        assert after.first_bad_seq == 1

        from console.audit import AuditChainBroken

        assert isinstance(appended, AuditChainBroken), appended
        assert isinstance(await _refused_call(api), AuditChainBroken)
        assert _count(api) == 0
    finally:
        _put_back(api, 0, saved)
    assert audit.verify().ok


async def test_verify_names_the_first_entry_that_does_not_match_its_anchor(api: Api) -> None:
    """Even with the log's key (a leak), a rewritten middle entry and a relinked chain after it are caught at
    the rewritten entry: every anchor is checked, not only the newest."""
    audit = _audit(api)
    first = _fresh_entries(api, 4)
    target = first + 1
    saved = _rows_from(api, target)
    key: bytes = audit._key
    try:
        with _as_owner(api) as conn:
            prev = saved[0][6]
            for n, r in enumerate(saved):
                detail = {"token_id": "forged"} if n == 0 else r[5]
                digest = entry_hash(prev, r[0], r[1], r[2], r[3], r[4], detail, key)
                conn.execute(
                    "UPDATE audit_log SET detail = %s, prev_hash = %s, hash = %s WHERE seq = %s",
                    (Jsonb(detail), prev, digest, r[0]),
                )
                prev = digest
        check = audit.verify()
        assert not check.ok
        assert check.first_bad_seq == target, check  # the old code: the newest entry, where its one anchor was
        assert "does not match its anchor" in check.why
    finally:
        _put_back(api, target, saved)
    assert audit.verify().ok


async def test_the_audit_code_runs_as_a_role_that_cannot_delete_nor_turn_the_trigger_off(api: Api) -> None:
    pool = api.saga.platform.pool
    with pool.connection() as conn:
        owner = conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'audit_log'").fetchone()
        assert owner is not None
        assert owner[0] != ROLE
        attrs = conn.execute("SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
        assert attrs == (False, False)
    refused = {
        "DELETE FROM audit_log": "permission denied",
        "TRUNCATE audit_log": "permission denied",
        "UPDATE audit_log SET actor = 'x'": "permission denied",
        "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only": "must be owner",
        "DROP TABLE audit_log": "must be owner",
    }
    with pool.connection() as conn, conn.transaction():
        conn.execute(f"SET LOCAL ROLE {ROLE}")
        for statement, why in refused.items():
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=why), conn.transaction():  # a savepoint
                conn.execute(statement)
        assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
    with pool.connection() as conn, conn.transaction():
        conn.execute(f"SET LOCAL ROLE {ROLE}")
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() is not None  # it reads

    # and the append really runs as it: take its INSERT away and the append fails, where the superuser
    # the pool connects as locally would have succeeded
    audit = _audit(api)
    with pool.connection() as conn:
        conn.execute(f"REVOKE INSERT ON audit_log FROM {ROLE}")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            audit.append(TESTER, "token_created", None, {"token_id": "as-role"})
    finally:
        with pool.connection() as conn:
            conn.execute(f"GRANT INSERT ON audit_log TO {ROLE}")
    audit.append(TESTER, "token_created", None, {"token_id": "as-role"})
    assert audit.verify().ok


async def test_an_append_rolled_back_after_its_anchor_blocks_nothing(api: Api) -> None:
    """The anchor is written before the entry's transaction commits; one that then rolls back leaves an anchor
    naming an entry that never existed. Its transaction is known to have aborted: appends and verify go on."""
    audit = _audit(api)
    _fresh_entries(api, 1)

    class Abandoned(Exception):
        """The decision the entry belonged to failed after the entry was written."""

    def decide() -> AuditEntry:
        with api.saga.platform.pool.connection() as conn, conn.transaction():
            entry = audit.append(TESTER, "token_created", None, {"token_id": "rolled-back"}, conn=conn)
            ghosts.append(entry)
            raise Abandoned

    ghosts: list[AuditEntry] = []
    with pytest.raises(Abandoned):
        decide()
    ghost = ghosts[0]
    check = audit.verify()
    assert check.ok, check
    kept = audit.append(TESTER, "token_created", None, {"token_id": "kept"})
    assert kept.seq == ghost.seq  # the number is taken again by the entry that was committed
    assert audit.verify().ok
    assert hmac.compare_digest(audit.entries(None, 100000)[-1].hash, kept.hash)


async def test_anchor_macs_are_keyed() -> None:
    """An anchor's MAC changes with the key (a bucket writer without the key cannot make one)."""
    from console.audit_anchors import AnchorStore

    one = AnchorStore(None, "b", hashlib.sha256(b"one").digest())
    two = AnchorStore(None, "b", hashlib.sha256(b"two").digest())
    assert one.key_for(7, 42, "a" * 64) != two.key_for(7, 42, "a" * 64)
    assert one.parse(one.key_for(7, 42, "a" * 64)) is not None
    assert one.parse(two.key_for(7, 42, "a" * 64)) is None

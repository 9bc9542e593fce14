"""``holders``: the candidates of every run are opened once per call, not once per run that names them (a
row that holds common template text is a candidate of many of the user's runs; opening it again for each run
cost a data-key read and a KMS call per run, which made a load of 200 erasures crawl); and they are opened
with no pool connection held (a data key's read takes one: holding one while asking for another starved the
pool when many erasures began at once)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from stores.memory.eraser import MemoryEraser
from stores.memory.verbatim_copies import holders, row_run_digests, run_digest, runs_of
from stores.privacy.embedding import tokens
from stores.privacy.identity import token_digest

SECRET = b"k" * 32


class _Result:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


class _Conn:
    """The two reads ``holders`` makes: the common-digest statistics (none common) and the GIN probe (every
    candidate, whatever the run)."""

    def __init__(self, candidates: list[tuple[Any, ...]]) -> None:
        self.candidates = candidates

    def execute(self, sql: Any, params: Any = None) -> _Result:
        self.statements = getattr(self, "statements", 0) + 1
        if isinstance(sql, str) and ("pg_stats" in sql or "most_common" in sql):
            return _Result([])
        if isinstance(sql, str) and "run_digests IS NULL" in sql:  # rows written before run digests: some
            return _Result([(True,)])
        runs = sum(1 for name in params if name.startswith("words"))  # one probe per run, in one statement
        return _Result([(n, *row) for n in range(runs) for row in self.candidates])


def _digests(text: str) -> list[str]:
    return [token_digest(SECRET, w) for w in tokens(text)]


def test_each_candidate_is_opened_once_however_many_runs_name_it() -> None:
    user = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november"
    words = _digests(user)
    runs = [words[0:8], words[4:12], words[6:14]]
    holder, other = uuid.uuid4(), uuid.uuid4()
    texts = {holder: "so " + user + " end", other: "nothing of the kind at all here today"}
    opened: list[uuid.UUID] = []

    def opener(row_id: uuid.UUID, _sealed: bytes) -> str | None:
        opened.append(row_id)
        return texts[row_id]

    candidates = [(row_id, b"sealed", sorted(set(_digests(t)))) for row_id, t in texts.items()]
    found = holders(_Conn(candidates), SECRET, opener, runs, "sk_user")  # type: ignore[arg-type]
    assert found == {holder}
    assert sorted(opened) == sorted(texts)  # each once: three runs, two candidates, two openings


def test_every_run_is_probed_in_one_statement() -> None:
    """The probes of all runs go in one statement (with the statistics read, two), not one per run: 64 runs
    made 121 statements of begin_request's 145 and 58 of the check's 81 (an ad-hoc count of one typical
    erasure), each a round trip."""
    user = " ".join(f"word{i}" for i in range(80))
    words = _digests(user)
    runs = [words[i : i + 8] for i in range(0, 72, 4)]
    holder = uuid.uuid4()
    conn = _Conn([(holder, b"sealed", sorted(set(words)))])
    found = holders(conn, SECRET, lambda _id, _s: user, runs, "sk_user")  # type: ignore[arg-type]
    assert found == {holder}
    assert conn.statements == 3  # the statistics, whether any row lacks run digests, the probes


def test_a_row_found_by_its_run_digest_is_not_opened() -> None:
    """A row written with run digests that holds a run is found by the index: nobody's row is opened, and no
    data key of another subject is asked of KMS (13 Decrypt calls per erasure in the quick benchmark)."""
    user = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    holder = uuid.uuid4()
    opened: list[uuid.UUID] = []

    def opener(row_id: uuid.UUID, _sealed: bytes) -> str | None:
        opened.append(row_id)
        return user

    conn = _Conn([(holder, None, None)])
    assert holders(conn, SECRET, opener, [_digests(user)[0:8]], "sk_user") == {holder}  # type: ignore[arg-type]
    assert opened == []


def test_a_copy_at_any_offset_holds_one_of_the_users_runs_by_digest() -> None:
    """The user's runs start every ``RUN_STEP`` words; a row's run digests are taken at every offset, so a copy
    of 12 consecutive words of the user's text, wherever it starts and whatever surrounds it, shares a digest
    with the user's runs; a row of the same words in another order shares none."""
    user = " ".join(f"w{i}" for i in range(40))
    runs = runs_of(SECRET, [user])
    wanted = {run_digest(r) for r in runs}
    for start in range(0, 28):
        copy = "some words before " + " ".join(f"w{i}" for i in range(start, start + 12)) + " and after"
        held = row_run_digests(_digests(copy))
        assert held is not None
        assert wanted & set(held), start
    shuffled = " ".join(f"w{i}" for i in reversed(range(40)))
    assert not wanted & set(row_run_digests(_digests(shuffled)) or [])


class _Pool:
    """One connection, as a pool of size one: asking for a second while the first is out is the starvation
    the concurrent erasures hit (every activity slot holding one and waiting for another)."""

    def __init__(self, conn: _Conn) -> None:
        self.conn, self.out = conn, 0

    @contextlib.contextmanager
    def connection(self) -> Iterator[_Conn]:
        assert self.out == 0, "a second connection asked for while one is held"
        self.out += 1
        try:
            yield self.conn
        finally:
            self.out -= 1


class _Store:
    """What ``holders_of_runs`` asks of the memory service: its secret and a row opener that, like a data
    key's read, takes a connection of the pool."""

    def __init__(self, pool: _Pool, texts: dict[uuid.UUID, str]) -> None:
        self.subject_secret, self.pool, self.texts = SECRET, pool, texts

    def row_opener(self) -> Any:
        def open_one(_sealed: bytes, row_id: bytes) -> bytes:
            with self.pool.connection():
                return self.texts[uuid.UUID(bytes=row_id)].encode()

        return open_one


def test_candidates_are_opened_with_no_connection_held() -> None:
    user = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    holder = uuid.uuid4()
    texts = {holder: user}
    pool = _Pool(_Conn([(holder, b"sealed", sorted(set(_digests(user))))]))
    found = MemoryEraser(pool).holders_of_runs([_digests(user)[0:8]], "sk_user", _Store(pool, texts))  # type: ignore[arg-type]
    assert found == {holder}

"""Long verbatim runs of a user's text in rows filed under other subjects: disclosed at the start, checked after.

Canaries are words only the user holds, so a copy of the user's text filed under someone else before the
request removes exactly the words that would show it; and a row moved under a new owner with new ids names
nothing the erasure recorded. Both are found by what the rows *say*: a run of ``RUN_WORDS`` consecutive words
of the user's memories and events.

At the start (``begin_request``) the user's texts give ordered runs of keyed word digests (``runs_of``; no word
in clear). ``holders`` finds rows of other subjects holding a run, in order: one GIN probe per run on the
``token_digests`` index with the run's words the table's statistics do not call common (``common_digests``:
cost follows the user's text, not the platform's size), then each candidate's content opened and its words'
digests compared in sequence. The rows found at the start are copies the platform made before the request:
kept, never deleted (they are another subject's rows), their count disclosed in the receipt for a reviewer to
act on. A row holding a run after the erasure that was not there at the start is the user's text still
present under another owner: the memory check fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg import Connection, sql

from stores.memory.common_digests import common_digests
from stores.privacy.embedding import tokens
from stores.privacy.identity import token_digest

RUN_WORDS = 8  # a run this long, word for word, is the user's text, not a coincidence of common phrasing
RUN_STEP = 4  # runs overlap by half: a copy of any 12 consecutive words holds one whole run
MAX_RUNS = 64  # bounded per request: the probes follow the user's text, never the platform's size
MIN_RARE = 3  # a run whose words are nearly all common is not probed (its GIN probe would read everyone)
CANDIDATES_PER_RUN = 50

Opener = Callable[[uuid.UUID, bytes], "str | None"]  # a row's content, or None when its key is shredded


def runs_of(secret: bytes, texts: Iterable[str]) -> list[list[str]]:
    """Ordered keyed digests of each run of ``RUN_WORDS`` words in ``texts`` (distinct runs, at most
    ``MAX_RUNS``); texts shorter than a run give none."""
    runs: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for text in texts:
        words = tokens(text)
        for start in range(0, max(len(words) - RUN_WORDS, 0) + 1, RUN_STEP):
            window = words[start : start + RUN_WORDS]
            if len(window) < RUN_WORDS:
                break
            run = tuple(token_digest(secret, w) for w in window)
            if run not in seen:
                seen.add(run)
                runs.append(list(run))
            if len(runs) >= MAX_RUNS:
                return runs
    return runs


def _holds_in_order(words: Sequence[str], run: Sequence[str]) -> bool:
    n = len(run)
    return any(list(words[i : i + n]) == list(run) for i in range(len(words) - n + 1))


_PROBE = sql.SQL(
    "(SELECT {n}::int, id, content_sealed, token_digests FROM memories WHERE token_digests @> {words}::text[] "
    "AND subject_key <> {subject} AND id <> ALL({rows}::uuid[]) ORDER BY id LIMIT {limit})"
)


def _probe(
    conn: Connection[Any],
    rares: Sequence[Sequence[str]],
    excluding_subject: str,
    excluding_rows: Sequence[uuid.UUID],
) -> list[list[tuple[Any, ...]]]:
    """For each of ``rares``, (id, sealed content, word digests) of up to ``CANDIDATES_PER_RUN`` rows of others
    holding every one of its words, in id order: one GIN probe per run, all in one statement. Each probe is
    its own branch with its words as a parameter, so the planner sees them (a lateral join over the runs hid
    them and walked the primary key in id order, reading the whole table)."""
    if not rares:
        return []
    query = sql.SQL(" UNION ALL ").join(
        _PROBE.format(
            n=sql.Literal(n),
            words=sql.Placeholder(f"words{n}"),
            subject=sql.Placeholder("subject"),
            rows=sql.Placeholder("rows"),
            limit=sql.Placeholder("limit"),
        )
        for n, rare in enumerate(rares)
    )
    params: dict[str, Any] = {f"words{n}": list(rare) for n, rare in enumerate(rares)}
    params.update(subject=excluding_subject, rows=list(excluding_rows), limit=CANDIDATES_PER_RUN)
    out: list[list[tuple[Any, ...]]] = [[] for _ in rares]
    for n, *row in conn.execute(query, params).fetchall():
        out[int(n)].append(tuple(row))
    return out


def _probed(conn: Connection[Any], runs: Sequence[Sequence[str]]) -> list[tuple[Sequence[str], list[str]]]:
    """Each run with the words of it the table's statistics do not call common, runs with too few left out."""
    common = common_digests(conn, sorted({d for run in runs for d in run}))
    pairs = [(run, sorted(set(run) - common)) for run in runs]
    return [(run, rare) for run, rare in pairs if len(rare) >= MIN_RARE]


Candidates = list[tuple[Sequence[str], list[tuple[Any, ...]]]]


def candidates(
    conn: Connection[Any],
    runs: Sequence[Sequence[str]],
    excluding_subject: str,
    excluding_rows: Sequence[uuid.UUID] = (),
) -> Candidates:
    """Each probed run with its candidate rows ``(id, sealed content, word digests)``: the reads (two
    statements however many runs), done with ``conn``; opening them (``holding``) needs none of it, so the
    caller gives the connection back first."""
    probed = _probed(conn, runs)
    found = _probe(conn, [rare for _run, rare in probed], excluding_subject, excluding_rows)
    return [(run, rows) for (run, _rare), rows in zip(probed, found, strict=True)]


def distinctive_of(probed: Candidates) -> Candidates:
    """Those probed runs fewer than ``CANDIDATES_PER_RUN`` rows of others may hold: a run many rows hold is
    common phrasing, not the user's text, and a bounded probe could not see all of its holders."""
    return [(run, rows) for run, rows in probed if len(rows) < CANDIDATES_PER_RUN]


def holding(secret: bytes, opener: Opener, probed: Candidates) -> set[uuid.UUID]:
    """The candidates whose content holds their run word for word. A candidate of several runs (common
    template text is) is opened once: its words' digests, in order, are kept for the next run that names it."""
    found: set[uuid.UUID] = set()
    opened: dict[uuid.UUID, list[str] | None] = {}
    for run, rows in probed:
        for row_id, sealed, digests in rows:
            if row_id in found:
                continue
            if row_id not in opened:
                text = opener(row_id, bytes(sealed))
                opened[row_id] = None if text is None else [token_digest(secret, w) for w in tokens(text)]
            words = opened[row_id]
            if words is None:  # sealed under a shredded key, or not under its own id: judged by its word digests
                if set(run) <= set(digests):
                    found.add(row_id)
                continue
            if _holds_in_order(words, run):
                found.add(row_id)
    return found


def holders(
    conn: Connection[Any],
    secret: bytes,
    opener: Opener,
    runs: Sequence[Sequence[str]],
    excluding_subject: str,
    excluding_rows: Sequence[uuid.UUID] = (),
) -> set[uuid.UUID]:
    """Rows of subjects other than ``excluding_subject`` (``excluding_rows`` aside) whose content holds one of
    ``runs`` word for word: an indexed probe per run (``candidates``), then the candidates opened and compared
    in order (``holding``)."""
    return holding(secret, opener, candidates(conn, runs, excluding_subject, excluding_rows))

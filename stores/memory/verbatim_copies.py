"""Long verbatim runs of a user's text in rows filed under other subjects: disclosed at the start, checked after.

Canaries are words only the user holds, so a copy of the user's text filed under someone else before the
request removes exactly the words that would show it; and a row moved under a new owner with new ids names
nothing the erasure recorded. Both are found by what the rows *say*: a run of ``RUN_WORDS`` consecutive words
of the user's memories and events.

At the start (``begin_request``) the user's texts give ordered runs of keyed word digests (``runs_of``; no word
in clear). ``holders`` finds rows of other subjects holding a run, in order. Every row keeps the digest of each
run of ``RUN_WORDS`` consecutive words it holds, at every offset (``row_run_digests``, written with the row), so
a holder is one GIN lookup of the run's digest away and nobody else's row is opened (nor their data key asked
of KMS). Rows written before that column are found as they were: a GIN probe on ``token_digests`` with the
run's words the table's statistics do not call common (``common_digests``), each candidate opened and its
words' digests compared in sequence. Either probe is made only for a run with enough rare words, so it reads
fewer rows than the rarest of them is held by: cost follows the user's text, not the platform's size.
The rows found at the start are copies the platform made before the request:
kept, never deleted (they are another subject's rows), their count disclosed in the receipt for a reviewer to
act on. A row holding a run after the erasure that was not there at the start is the user's text still
present under another owner: the memory check fails.
"""

from __future__ import annotations

import hashlib
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
MAX_ROW_RUNS = 2048  # a row's run digests kept at most (memory rows are short; a longer one is opened instead)

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


def run_digest(run: Sequence[str]) -> str:
    """One run of ordered word digests (keyed already) as one digest: what a row's ``run_digests`` holds."""
    return hashlib.sha256(" ".join(run).encode("ascii")).hexdigest()[:32]


def row_run_digests(word_digests: Sequence[str]) -> list[str] | None:
    """Every run of ``RUN_WORDS`` consecutive words of a row (``word_digests`` in text order), at every offset,
    as ``run_digest``s, sorted and distinct: written with the row, so a copy of the user's text under another
    owner is found by one index lookup without opening the row. ``None`` for a row longer than
    ``MAX_ROW_RUNS`` runs: it is found as rows written before the column were (opened and compared)."""
    if len(word_digests) - RUN_WORDS + 1 > MAX_ROW_RUNS:
        return None
    return sorted({run_digest(word_digests[i : i + RUN_WORDS]) for i in range(len(word_digests) - RUN_WORDS + 1)})


#: a row with a run digest holds the run word for word: found by the index, never opened (``holding``)
_BY_RUN = sql.SQL(
    "(SELECT {n}::int, id, NULL::bytea, NULL::text[] FROM memories WHERE run_digests @> ARRAY[{run}]::text[] "
    "AND subject_key <> {subject} AND id <> ALL({rows}::uuid[]) ORDER BY id LIMIT {limit})"
)
#: a row written before ``run_digests`` (or too long for it): a candidate by its words, opened and compared
_BY_WORDS = sql.SQL(
    "(SELECT {n}::int, id, content_sealed, token_digests FROM memories WHERE token_digests @> {words}::text[] "
    "AND run_digests IS NULL AND subject_key <> {subject} AND id <> ALL({rows}::uuid[]) ORDER BY id LIMIT {limit})"
)


def _unrun_rows(conn: Connection[Any]) -> bool:
    """Whether any memory row lacks run digests (a partial index answers it without reading a row)."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM memories WHERE run_digests IS NULL)").fetchone()
    return bool(row and row[0])


def _probe(
    conn: Connection[Any],
    probed: Sequence[tuple[Sequence[str], Sequence[str]]],
    excluding_subject: str,
    excluding_rows: Sequence[uuid.UUID],
) -> list[list[tuple[Any, ...]]]:
    """For each ``(run, its rare words)`` of ``probed``, up to ``CANDIDATES_PER_RUN`` rows of others holding
    the run, in id order, as ``(id, sealed content, word digests)``: rows with run digests by the run's digest
    (content ``None``: found, nothing to open), rows without them by the run's rare words (to be opened). One
    GIN probe per run and kind, all in one statement, each its own branch with its values as parameters so the
    planner sees them (a lateral join over the runs hid them and walked the primary key, reading the table)."""
    if not probed:
        return []
    branches = [_BY_RUN] + ([_BY_WORDS] if _unrun_rows(conn) else [])
    query = sql.SQL(" UNION ALL ").join(
        branch.format(
            n=sql.Literal(n),
            run=sql.Placeholder(f"run{n}"),
            words=sql.Placeholder(f"words{n}"),
            subject=sql.Placeholder("subject"),
            rows=sql.Placeholder("rows"),
            limit=sql.Placeholder("limit"),
        )
        for n in range(len(probed))
        for branch in branches
    )
    params: dict[str, Any] = {}
    for n, (run, rare) in enumerate(probed):
        params[f"run{n}"] = run_digest(run)
        if _BY_WORDS in branches:
            params[f"words{n}"] = list(rare)
    params.update(subject=excluding_subject, rows=list(excluding_rows), limit=CANDIDATES_PER_RUN)
    out: list[list[tuple[Any, ...]]] = [[] for _ in probed]
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
    found = _probe(conn, probed, excluding_subject, excluding_rows)
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
            if sealed is None:  # found by its run digest: it holds the run word for word
                found.add(row_id)
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

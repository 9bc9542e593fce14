"""Resolution before action: what a request to forget ("where I live") would act on, in plain words.

``resolve`` asks the same retrieval the agent uses for recall (``MemoryStore.search``, nearest embeddings
of the user's own rows) and keeps the hits that hold at least one of the description's content words,
so what the agent would surface is exactly what is offered for forgetting. It also lists the user's
``user:`` state entries whose value holds one of those words, the summaries drawn from the candidates
(they go with them), and how many items of other users hold the same words (never touched: forgetting
acts on one user's items only). Nothing is changed; the caller shows the preview and acts on the ids
the person confirms. The candidates' texts go to the person who owns them, never to logs or Temporal.
``user:`` state values are sealed under the user's data key (``stores.sessions.sealing``): they are opened here.

Staff who may not read the subject's words get ``Preview.without_content()`` (issue 40): the items by id,
kind, date and whether they are already hidden, the settings by key, counts, in a fixed order, and nothing
computed from which of the description's words each item holds (``matched`` runs were an oracle: guessing
``account number 8014`` showed ``8014`` back, ``8015`` did not). What remains is what resolving a description
means: whether an item holds any of its words (so a one-word guess can tell whether some item holds that
word, and among a user's many items, which ones the recall ranking reaches may follow the other words);
the console limits previews per principal and per subject and audits each, and the approver who decides
reads the words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.ledgers.forget_tombstones import MAX_SPAN_WORDS, TombstoneMatcher
from stores.memory.store import MemoryStore
from stores.privacy.embedding import tokens
from stores.privacy.identity import subject_key, token_digest
from stores.privacy.keys import DataKeyStore
from stores.sessions.sealing import RowSealer

#: words that say how to ask, not what about: never the reason an item is offered
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "im",
        "i'm",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "ours",
        "you",
        "your",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "and",
        "or",
        "but",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "where",
        "what",
        "who",
        "whom",
        "when",
        "why",
        "how",
        "about",
        "please",
        "forget",
        "remember",
        "forgot",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "from",
        "with",
        "as",
        "so",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "just",
        "all",
        "any",
        "some",
        "thing",
        "things",
        "stuff",
        "there",
        "here",
        "them",
        "they",
        "he",
        "she",
        "him",
        "her",
        "his",
        "hers",
        "us",
    ]
)


def content_words(text: str) -> list[str]:
    seen: list[str] = []
    for word in tokens(text):
        if word not in STOPWORDS and word not in seen:
            seen.append(word)
    return seen


@dataclass(frozen=True)
class Candidate:
    memory_id: str
    kind: str
    written: str  # the day it was written (YYYY-MM-DD)
    text: str  # the item, shown to the person it belongs to
    matched: list[str]  # the description's words it holds
    hidden: bool = False  # already suppressed
    echoes: str | None = None  # the candidate this item quotes (the agent's own reply repeating the fact)

    def withheld(self) -> Candidate:
        """The candidate as a role without content access sees it: id, kind, date, hidden; no words."""
        return Candidate(self.memory_id, self.kind, self.written, "", [], self.hidden)

    def describe(self) -> str:
        quoted = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        what = {"episode": "something said", "fact": "a fact", "summary": "a summary"}.get(self.kind, self.kind)
        also = " (repeats another item found)" if self.echoes else ""
        return f'{what} from {self.written}: "{quoted}"{also}'


@dataclass(frozen=True)
class StateCandidate:
    key: str  # as the agent sees it: user:<name>
    value: str


@dataclass(frozen=True)
class Preview:
    about_words: list[str]
    candidates: list[Candidate]
    state_keys: list[StateCandidate]
    derived: int  # rows derived from the candidates (summaries): removed with them and listed
    others_holding: int  # items of other users that hold the description's words: never touched (capped)
    warnings: list[str] = field(default_factory=list)
    unreadable: int = 0  # stored settings whose key is gone: not searched

    def without_content(self) -> Preview:
        """What a role without content access is shown: the same items and settings by id, kind, date and key,
        ordered by date and id (the recall ranking follows the description's words), with notes that count
        them; no text, no matched words, no echo links, no count of other users' items."""
        candidates = sorted((c.withheld() for c in self.candidates), key=lambda c: (c.written, c.memory_id))
        states = sorted((StateCandidate(s.key, "") for s in self.state_keys), key=lambda s: s.key)
        notes = _notes(len(candidates), len(states), self.unreadable) if self.about_words else list(self.warnings)
        return Preview([], candidates, states, self.derived, 0, notes, self.unreadable)

    def spans(self, chosen: list[str]) -> list[str]:
        """The spans a forget of the chosen candidates blocks: each chosen item's own words, when short."""
        return [c.text for c in self.candidates if c.memory_id in chosen and len(tokens(c.text)) <= MAX_SPAN_WORDS]


OTHERS_CAP = 100


def resolve(
    pool: ConnectionPool,
    store: MemoryStore,
    secret: bytes,
    app_name: str,
    user_id: str,
    about: str,
    *,
    limit: int = 10,
    hidden: TombstoneMatcher | None = None,
    keys: DataKeyStore,
) -> Preview:
    words = content_words(about)
    if not words:
        return Preview([], [], [], 0, 0, ["the description names nothing to look for: say what to forget"])
    found = store.search(app_name, user_id, about, limit=max(limit * 4, 20), everything=True)
    candidates: list[Candidate] = []
    for item in found:
        held = set(tokens(item.text))
        matched = [w for w in words if w in held]
        if not matched:
            continue
        candidates.append(
            Candidate(
                item.id,
                item.kind,
                item.created_at.date().isoformat(),
                item.text,
                matched,
                hidden=bool(hidden and hidden.covers(item.id, item.text)),
            )
        )
        if len(candidates) >= limit:
            break
    sk = subject_key(secret, app_name, user_id)
    digests = [token_digest(secret, w) for w in words]
    with pool.connection() as conn:
        state_rows = conn.execute(
            "SELECT user_id, state FROM user_states WHERE app_name = %s AND user_id = ANY(%s) ORDER BY user_id",
            (app_name, [sk, user_id]),
        ).fetchall()
        others = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories WHERE token_digests && %s::text[] AND subject_key <> %s "
            "LIMIT %s) AS holders",
            (digests, sk, OTHERS_CAP),
        ).fetchone()
        ids = [c.memory_id for c in candidates]
        derived = conn.execute(
            "SELECT count(DISTINCT m.id) FROM unnest(%s::uuid[]) AS given(id) "
            "JOIN memories m ON m.derived_from @> ARRAY[given.id]",
            (ids,),
        ).fetchone()
    opened: dict[str, object] = {}
    unreadable = 0
    for filed, stored in state_rows:  # under the subject key, and a legacy row under the raw id
        some, failed = RowSealer(keys, secret).open_state_readable(
            app_name, filed, None, stored if isinstance(stored, dict) else {}
        )
        opened, unreadable = {**some, **opened}, unreadable + failed
    values = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in opened.items()]
    states = [StateCandidate(f"user:{k}", v) for k, v in values if set(tokens(v)) & set(words)]
    warnings = _notes(len(candidates), len(states), unreadable)
    holders = int(others[0]) if others else 0
    # how many items of other users hold the words is kept for the platform's own checks, never shown: a
    # preview (to staff, or to the user through the agent) must say nothing about people it did not name
    candidates += echoes_of(pool, store, sk, candidates, limit)
    return Preview(words, candidates, states, int(derived[0]) if derived else 0, holders, warnings, unreadable)


def _notes(items: int, settings: int, unreadable: int) -> list[str]:
    """The preview's notes, from counts alone."""
    notes: list[str] = []
    if unreadable:
        notes.append(f"{unreadable} stored setting(s) could not be opened (their key is gone): not searched")
    if items > 1:
        notes.append(
            f"{items} items match, not necessarily for the same reason: choose the ones to forget "
            "(a loose description can catch unrelated items)"
        )
    if not items and not settings:
        notes.append("nothing stored matches the description")
    return notes


#: an echo shares this many consecutive words with a candidate, or fewer when one of them holds a digit
ECHO_WORDS = 5
ECHO_ROWS = 500  # the user's rows read for echoes (newest first): bounded by the user's data
MIN_DIGITS = 4  # a run of numbers shows the same fact when it holds this many digits ("2 kids" does not)


def _quoted_runs(text: str) -> list[tuple[str, ...]]:
    """The runs of a candidate's words whose presence elsewhere shows the same fact: each maximal run of words
    holding a digit (a number, a date, a code), and each ``ECHO_WORDS``-word run of content words."""
    words = tokens(text)
    runs: list[tuple[str, ...]] = []
    i = 0
    while i < len(words):  # a phone number is several digit words in a row: "555 0142"
        if any(ch.isdigit() for ch in words[i]):
            j = i
            while j < len(words) and any(ch.isdigit() for ch in words[j]):
                j += 1
            runs.append(tuple(words[i:j]))
            i = j
        else:
            i += 1
    runs += [tuple(words[k : k + ECHO_WORDS]) for k in range(0, len(words) - ECHO_WORDS + 1)]
    numbers = [r for r in runs if sum(ch.isdigit() for w in r for ch in w) >= MIN_DIGITS]
    phrases = [r for r in runs if not any(ch.isdigit() for w in r for ch in w)]
    return [r for r in [*numbers, *phrases] if not all(w in STOPWORDS for w in r)]


def echoes_of(
    pool: ConnectionPool, store: MemoryStore, subject: str, candidates: list[Candidate], limit: int
) -> list[Candidate]:
    """The user's other items that repeat a candidate's fact word for word (the agent's reply quoting the number
    back, a summary restating it) though they hold none of the description's words: offered with it, so a
    forget removes the fact, not one sentence of it."""
    if not candidates:
        return []
    runs = {c.memory_id: _quoted_runs(c.text) for c in candidates}
    taken = {c.memory_id for c in candidates}
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, kind, created_at, content_sealed FROM memories WHERE subject_key = %s "
            "ORDER BY created_at DESC LIMIT %s",
            (subject, ECHO_ROWS),
        ).fetchall()
    echoes: list[Candidate] = []
    for row_id, kind, created, sealed in rows:
        if str(row_id) in taken or len(echoes) >= limit:
            continue
        try:
            text = store.decrypt_row(row_id, bytes(sealed))
        except (DataKeyShredded, CiphertextInvalid):
            continue
        words = tokens(text)
        for source, wanted in runs.items():
            hit = next((r for r in wanted if _holds(words, r)), None)
            if hit is not None:
                echoes.append(Candidate(str(row_id), kind, created.date().isoformat(), text, list(hit), echoes=source))
                taken.add(str(row_id))
                break
    return echoes


def _holds(words: list[str], run: tuple[str, ...]) -> bool:
    n = len(run)
    return any(tuple(words[i : i + n]) == run for i in range(len(words) - n + 1))

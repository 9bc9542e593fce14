"""The words the receipt's certificate (``console.certificate``) uses for what a receipt counts.

A receipt counts in the stores' own terms (``events``, ``objects``, ``derived_rows_held``), which is exact and
means little to the data subject or a regulator reading it. Each count a store step reports is said here as
what it is: something of the user's that was erased, something kept for a person under a legal hold, or a
note on how the work was done; a few counts describe only the mechanics (delete calls, batches, a resumed
attempt) and are left out. A count this table does not know is shown under its own name, never dropped and
never called an erasure: a store added later cannot make the certificate claim more than its receipt says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["erased", "held", "note", "internal"]


@dataclass(frozen=True)
class Word:
    """How one count reads: ``one`` and ``many`` after the number, and what kind of thing it counts."""

    one: str
    many: str
    kind: Kind = "erased"

    def said(self, n: int) -> str:
        return f"{n} {self.one if n == 1 else self.many}"


COUNTS: dict[str, Word] = {
    # what was erased, in the stores' step counts and the second sweep's
    "objects": Word(
        "artifact version (every version and delete marker)", "artifact versions (every version and delete marker)"
    ),
    "artifacts": Word("artifact version", "artifact versions"),
    "artifact_versions": Word("artifact version", "artifact versions"),
    "incomplete_uploads": Word("unfinished artifact upload aborted", "unfinished artifact uploads aborted"),
    "events": Word("session event", "session events"),
    "sessions": Word("session", "sessions"),
    "user_states": Word("user-state record", "user-state records"),
    "rows": Word("memory row (with its embedding)", "memory rows (with their embeddings)"),
    "memory_rows": Word("memory row", "memory rows"),
    "derived_rows": Word("derived summary", "derived summaries"),
    "session_copies": Word(
        "copy of an erased session kept in another user's memory",
        "copies of erased sessions kept in other users' memory",
    ),
    "lines": Word("log line", "log lines"),
    "log_lines": Word("log line", "log lines"),
    "key_versions": Word("data key version (crypto-shredded)", "data key versions (crypto-shredded)"),
    "chroma_memories": Word("memory in the Chroma store", "memories in the Chroma store"),
    "qdrant_points": Word("vector point", "vector points"),
    "cached_responses": Word("cached response", "cached responses"),
    "unindexed_entries": Word("cache entry found outside the index", "cache entries found outside the index"),
    # kept for someone else under a legal hold (a hold protects its owner, whatever the erasure)
    "derived_rows_held": Word(
        "derived summary filed under another user who is under a legal hold (kept)",
        "derived summaries filed under other users who are under a legal hold (kept)",
        "held",
    ),
    "lines_held": Word(
        "log line written by someone under a legal hold (kept)",
        "log lines written by people under a legal hold (kept)",
        "held",
    ),
    "lines_held_readable": Word(
        "of those, kept readable by its writer", "of those, kept readable by their writers", "held"
    ),
    "lines_held_unreadable": Word(
        "of those, sealed under this user's destroyed key (unreadable)",
        "of those, sealed under this user's destroyed key (unreadable)",
        "held",
    ),
    # how the work was done
    "segments": Word("log segment rewritten", "log segments rewritten", "note"),
    "session_tombstones": Word(
        "session tombstoned for good (never ingested again)",
        "sessions tombstoned for good (never ingested again)",
        "note",
    ),
    "malformed_lines": Word(
        "malformed log line kept (not this user's by its structure)",
        "malformed log lines kept (not this user's by their structure)",
        "note",
    ),
    # mechanics only
    "delete_requests": Word("", "", "internal"),
    "resumed_from_heartbeat": Word("", "", "internal"),
    "batches": Word("", "", "internal"),
}

STORES: dict[str, str] = {
    "artifacts": "Artifacts (files the agent stored, with every version)",
    "sessions": "Sessions (conversation events and user state)",
    "memory": "Memory (memory rows, their embeddings and summaries derived from them)",
    "logs": "Logs (the log archive)",
    "keys": "Keys (this user's data keys)",
    "response_cache": "Response cache (cached prompts and answers)",
    "chroma_memory": "Chroma memory (a vector store of memories)",
    "qdrant_memory": "Qdrant memory (a vector store of memories)",
}

WHAT: dict[str, str] = {
    "deleted": "Deleted",
    "unreadable": "Made unreadable: the key that opens it was destroyed",
}

PHASES: dict[str, str] = {
    "main": "First check, right after the erasure",
    "final": "Final check, after the second sweep",
}

#: checks that are not a store's, in words
CHECKS: dict[str, str] = {"fence": "session tombstones (no erased session can be ingested again)"}


@dataclass
class Said:
    """A store's counts, said: what was erased, what was kept under a legal hold, notes on how."""

    erased: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def words(counts: Mapping[str, object]) -> Said:
    """``counts`` in words, each non-zero count once (zeros say nothing): the table's counts in its order,
    then any other by name."""
    said = Said()
    known = [n for n in COUNTS if n in counts]  # the table's order, whatever order the counts were stored in
    for name, value in [(n, counts[n]) for n in known] + sorted((n, v) for n, v in counts.items() if n not in COUNTS):
        if not isinstance(value, int) or isinstance(value, bool) or value == 0:
            continue
        word = COUNTS.get(name)
        if word is None:  # unknown: its own name, as a note; a held count still goes with the holds
            text = f"{name.replace('_', ' ')}: {value}"
            (said.held if "held" in name else said.notes).append(text)
        elif word.kind == "erased":
            said.erased.append(word.said(value))
        elif word.kind == "held":
            said.held.append(word.said(value))
        elif word.kind == "note":
            said.notes.append(word.said(value))
    return said


def store_title(store: str) -> str:
    return STORES.get(store, store)


def duration(seconds: int) -> str:
    """A window in the largest whole unit: ``5 minutes``, ``24 hours``, ``90 seconds``."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"

"""The PII-free dataclasses of the session re-seal, and its activity declaration.

The re-seal sees table names, page sizes, counts and an opaque cursor: the last row's ids sealed under
that row's user's data key (``stores.sessions.reseal``), so no raw id is readable from Temporal history once
the user's key is shredded. Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from temporalio import activity

from workflows.contracts.declarations import declared_only

RESEAL_WORKFLOW = "ResealSessionsWorkflow"
#: one re-seal at a time: the CLI starts (or attaches to) this id
RESEAL_RUN_ID = "reseal-adk-sessions"
#: google-adk's tables holding user content, in the order the re-seal walks them
RESEAL_TABLES = ("events", "sessions", "user_states")


class ResealActivityNames:
    PAGES = "reseal_pages"


@dataclass(frozen=True)
class ResealCounts:
    pages: int = 0
    rows: int = 0  # rows read
    sealed_rows: int = 0  # rows sealed by this re-seal
    already_sealed: int = 0  # rows that held no plain content
    changed_meanwhile: int = 0  # rows rewritten while being re-sealed (by the sealed service): left alone
    unsealable: int = 0  # rows whose app or user id makes no subject key: left as they are
    refiled: int = 0  # rows moved from the raw user id to the subject key (sealed on the way)
    restarts: int = 0  # tables walked again from the start (the cursor's key was shredded meanwhile)
    held: int = 0  # rows of a subject under a legal hold: left exactly as they are
    conflicting: int = 0  # raw-filed user state whose keys the subject key's row holds with other values: left

    def plus(self, other: ResealCounts) -> ResealCounts:
        return ResealCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True)
class ResealInput:
    page_size: int = 200
    pages_per_activity: int = 10  # pages per activity attempt (it heartbeats its cursor after each page)
    pages_per_run: int = 100  # continue-as-new after this many pages: every run's history stays small
    table: str = ""  # the table being walked ('' for the first)
    cursor: str = ""  # opaque cursor within it ('' for its start)
    so_far: ResealCounts = field(default_factory=ResealCounts)


@dataclass(frozen=True)
class ResealPagesInput:
    table: str
    cursor: str
    page_size: int
    max_pages: int


@dataclass(frozen=True)
class ResealPagesResult:
    cursor: str  # where the next call goes on
    done: bool  # the table has no more rows
    counts: ResealCounts


@dataclass(frozen=True)
class ResealProgress:
    status: str  # running | done | continued
    table: str
    counts: ResealCounts
    tables_done: list[str] = field(default_factory=list)


@activity.defn(name=ResealActivityNames.PAGES)
def reseal_pages(inp: ResealPagesInput) -> ResealPagesResult:
    raise declared_only()

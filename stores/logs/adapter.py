"""Adapter for the log archive: the subject's lines in the segments its subject index names.

A line is the subject's by structure only: same app and a clear ``subject`` field equal to the subject key
(sealed lines) or a ``user_id`` hashing to it (plain lines shipped before sealing), or the subject key among
the mention keys the shipper recorded; nothing is opened to erase or check. Erase rewrites only the indexed
segments, a few at a time (``SEGMENT_PURGERS``, each under its own segment lock; a purged segment leaves
the index, so a retry sees only the rest), removes old versions, and keeps every other line byte for byte;
others' malformed lines are counted (``malformed_lines``), never a failure. The erase's counts are what the
archive recorded for the request in the statement that dropped each index row (``log_purge_tally``), not
what heartbeats carried: exact after a worker was killed between a purge and its heartbeat. Remaining has
its own reader (``stores.logs.reads``): the index rows, the lines in the segments the logs step recorded
and in a sample of the most recent segments, and old segment versions. Segments shipped before mention
keys existed ("legacy", ``stores.logs.archive``) hold mention-only lines without structure: the eraser
removes those its index confirms and otherwise keeps the index row; the check counts any left
(``legacy_mention_lines``) by the exact identity of a whole word.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stores.adapters.common import digest
from stores.adapters.interface import (
    Beat,
    Bound,
    DataClaims,
    Disposition,
    ForgetScope,
    ItemsCheck,
    Remaining,
    Subject,
    Swept,
)
from stores.adapters.side_by_side import few_at_a_time
from stores.logs.archive import segment_key, shared_archive
from stores.logs.reads import LogReads, SegmentScan, SubjectLineRule
from stores.privacy.identity import session_ref
from stores.privacy.redaction import sensitive

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

#: the check's sample of the newest segments (lines a shipper failed to index): at most this many segments,
#: and no segment once those before it hold this many lines (its cost bounded whatever the platform's traffic)
RECENT_LOG_SAMPLE = 20
RECENT_LOG_SAMPLE_LINES = 20_000
#: segments read at once by one check: reads of small objects wait on the object store more than they use a
#: core (a typical user's final verification: 0.129 s with 4, 0.109 s with 8, eight erasures each); each
#: old-version listing of a segment that shows some briefly holds a pooled connection
LOG_READERS = 8
#: segments one erasure purges at once: each holds a pooled connection (its segment lock) while it reads,
#: rewrites and re-lists its object, so a few at once, not one per segment
SEGMENT_PURGERS = 3
MALFORMED = "malformed_lines"
#: lines naming the subject whose writer is under a legal hold: kept, reported
HELD = "lines_held"
HELD_LEFT = "lines_kept_under_owners_hold"
#: of the held lines of other writers: kept readable by their writers (the subject's layer lifted before its
#: key is shredded), and kept as they were though sealed under the subject's key (unreadable once shredded)
HELD_READABLE = "lines_held_readable"
HELD_UNREADABLE = "lines_held_unreadable"
HELD_LEFT_READABLE = "held_lines_readable_by_their_writers"
HELD_LEFT_SEALED = "held_lines_sealed_under_subjects_key"


class LogsAdapter:
    name = "logs"
    after: tuple[str, ...] = ()
    batched = True
    disposition = Disposition(
        "deleted",
        "old segment versions deleted; the object store keeps deleted bytes until it compacts and bucket "
        "backups keep them: user ids and messages sealed, key destroyed; subject keys in clear",
    )

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.s3, self.bucket = context.pool, context.s3, context.buckets.logs
        self.secret, self.requests = context.subject_secret, context.requests
        self.logs = shared_archive(context)

    def locate(self, subject: Subject) -> dict[str, int]:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM log_subject_index WHERE subject_key = %s LIMIT 1000) l",
                (subject.subject_key,),
            ).fetchone()
        return {"log_segments": int(row[0]) if row else 0}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        archive = self.logs
        segments = archive.segments_of(subject.subject_key)
        self.requests.update_record(
            subject.request_id,
            lambda r: replace(r, purged_segments=sorted(set(r.purged_segments or []) | set(segments))),
        )
        done = int(cursor.get("segments", 0))  # progress only: the counts are the tally's

        def purge(key: str) -> None:
            archive.purge_subject(key, subject.app_name, subject.subject_key, tally=subject.request_id)

        with sensitive(*([subject.user_id] if subject.user_id else [])):
            # purged segments leave the index: a retry sees only the rest; each purge is heartbeaten from this
            # thread as it ends, and the next starts only then, so a kill can land between two purges
            for n, _ in enumerate(few_at_a_time(purge, segments, SEGMENT_PURGERS)):
                beat({"segments": done + n + 1, "remaining": len(segments) - n - 1})
        tally = archive.tallied(subject.request_id)
        # others' bad lines: kept, reported, not a failure; lines of writers under a hold: kept, reported, with
        # how many of them their writers can still read once the subject's key is shredded
        held = {
            name: n
            for name, n in (
                (HELD, tally.held),
                (HELD_READABLE, tally.held_readable),
                (HELD_UNREADABLE, tally.held_unreadable),
            )
            if n
        }
        return {"segments": tally.segments, "lines": tally.lines, MALFORMED: tally.malformed, **held}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        if record.purged_segments is None:
            return Remaining(missing=("the logs step's list of purged segments",))
        reads = LogReads(self.pool, self.s3, self.bucket, self.logs.segment_lock)
        rule = SubjectLineRule(self.secret, subject.app_name, subject.subject_key)
        before = bound.erased_at if bound else None
        named = sorted(set(record.purged_segments))
        newest = reads.recent_segments(RECENT_LOG_SAMPLE, before, RECENT_LOG_SAMPLE_LINES)
        sample = [k for k in newest if k not in set(named)]
        legacy = reads.legacy_segments(named + sample)

        def inspect(key: str) -> tuple[SegmentScan, int]:
            """(scan, old versions) of one segment; nothing once it is gone. Old versions of named ones."""
            body = reads.body(key)
            if body is None:
                return SegmentScan(), 0
            return rule.scan(body, legacy=key in legacy), reads.old_versions(key) if key in named else 0

        with ThreadPoolExecutor(LOG_READERS, thread_name_prefix="verify-logs") as readers:
            scans: list[tuple[str, SegmentScan, int]] = []
            for n, (key, (scan, old)) in enumerate(
                zip(named + sample, readers.map(inspect, named + sample), strict=True)
            ):
                scans.append((key, scan, old))
                beat({"segments_checked": n + 1})
        # lines the eraser kept because their writer is under a legal hold: reported, not left over
        held = reads.held_writers({w for _k, scan, _o in scans for w in scan.writers})
        named_lines = sample_lines = old_versions = malformed = legacy_mentions = held_lines = 0
        held_readable = held_sealed = 0
        held_only: list[str] = []  # segments whose only lines naming the subject are held ones
        for n, (key, scan, old) in enumerate(scans):
            kept = scan.held_lines(held)
            held_lines += kept
            readable, sealed = scan.held_readable(held, subject.subject_key)
            held_readable, held_sealed = held_readable + readable, held_sealed + sealed
            if kept and kept == scan.subject_lines:
                held_only.append(key)
            if n < len(named):
                named_lines += scan.subject_lines - kept
            else:
                sample_lines += scan.subject_lines - kept
            old_versions += old
            malformed += scan.malformed_lines
            legacy_mentions += scan.legacy_mention_lines
        counts = {
            "index_entries": reads.index_entries(subject.subject_key, before, besides=held_only),
            "lines_in_named_segments": named_lines,
            "old_segment_versions": old_versions,
            "lines_in_recent_sample": sample_lines,
            "legacy_mention_lines": legacy_mentions,
        }
        notes = [f"{malformed} malformed lines of others kept as they were"] if malformed else []
        if held_lines:
            notes.append(f"{held_lines} lines kept under their writers' legal holds")
        if held_readable:
            notes.append(f"{held_readable} of them sealed without this subject's key: readable by their writers")
        if held_sealed:
            notes.append(f"{held_sealed} of them still sealed under this subject's key: unreadable once it is shredded")
        reported = {
            MALFORMED: malformed,
            **{
                name: n
                for name, n in (
                    (HELD_LEFT, held_lines),
                    (HELD_LEFT_READABLE, held_readable),
                    (HELD_LEFT_SEALED, held_sealed),
                )
                if n
            },
        }
        return Remaining(counts, reported=reported, note="; ".join(notes))

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        """Lines naming the subject in the segments its index names (only segments whose window predates
        ``before``: later ones belong to a returning user)."""
        removed = malformed = held = readable = unreadable = 0
        archive = self.logs
        for key in archive.segments_of(subject.subject_key, window_before=before):
            purged = archive.purge_subject(key, subject.app_name, subject.subject_key)
            removed += purged.removed
            malformed += purged.malformed
            held += purged.held
            readable += purged.held_readable
            unreadable += purged.held_unreadable
        kept = {
            f"log_{name}": n
            for name, n in ((HELD, held), (HELD_READABLE, readable), (HELD_UNREADABLE, unreadable))
            if n
        }
        return Swept({"log_lines": removed}, {MALFORMED: malformed, **kept})

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        from stores.privacy.identity import subject_key

        sk = subject_key(self.secret, app_name, user_id)
        with self.pool.connection() as conn:
            index = conn.execute(
                "SELECT segment_key, line_count FROM log_subject_index WHERE subject_key=%s ORDER BY segment_key",
                (sk,),
            ).fetchall()
        lines = [json.dumps(r, sort_keys=True) for r in self.logs.lines_of(sk, app_name, [s for s, _n in index])]
        return {
            "log_index": digest(index),
            "log_lines": digest(sorted(lines)),
            "counts": {"log_segments": len(index), "log_lines": len(lines)},
        }

    # ----- item forgetting (``ItemForgetting``): a session erasure removes the session's lines -----------

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """A session erasure: the session's lines (by their ``session_ref``) in every segment the subject's
        index names, each rewritten by the gated ``purge_session`` under its segment lock; the subject's
        other lines and everyone else's stay byte for byte. Item forgets: log lines are not memory items."""
        session_id = scope.erased_session()
        if session_id is None:
            return {}
        lines, ref = 0, session_ref(scope.subject_key, session_id)
        for key in self.logs.segments_of(scope.subject_key):
            lines += self.logs.purge_session(key, scope.app_name, scope.subject_key, ref).removed
            beat({"lines": lines})
        return {"log_lines": lines}

    def items_left(self, scope: ForgetScope) -> int:
        """Lines of the erased session still in the subject's indexed segments (read directly)."""
        session_id = scope.erased_session()
        if session_id is None:
            return 0
        return self.logs.session_lines_left(
            scope.app_name, scope.subject_key, session_ref(scope.subject_key, session_id)
        )

    def items_check(self, scope: ForgetScope) -> ItemsCheck | None:
        """Checked for a session erasure only, under the name the forget's receipts have always used."""
        return ItemsCheck("logs", "session_lines_left") if scope.erased_session() else None

    def claims(self) -> DataClaims:
        """The data map: the subject index and the bucket's top-level prefix of every segment (``segment_key``)."""
        top = segment_key(datetime(2000, 1, 1), 0).split("/", 1)[0]
        return DataClaims(tables=("log_subject_index",), prefixes=(f"{self.bucket}/{top}/",))

    def vacuum_tables(self) -> tuple[str, ...]:
        """None for the plain vacuum: the subject index holds subject keys and segment names only (no
        content); its dead tuples are left to autovacuum, as before the tables came from the adapters."""
        return ()

"""The platform's log archive: JSON lines in S3 segments, indexed by subject key at ship time.

A segment is one object per (time window, shard). When it ships, ``log_subject_index`` records which
subjects have lines in it (with how many), so a purge rewrites only the segments the index names.

Identity is structural, never free text. The shipper records in each line the subject keys of the users
the line mentions (``"mentions"``: keyed hashes of (app, user), PII-free), so a line is a subject's iff its
``app`` is the subject's app and either its ``user_id`` field hashes to the subject key (exact: the raw id,
same app) or the subject key is among its recorded mention keys. A number or an address that merely
appears in another user's text is never the user.

A purge removes every line naming the subject, mention-only lines included, and keeps every other line
byte for byte, including lines that are not JSON, not UTF-8 or carry a ``user_id`` no identity could have:
those are counted (``malformed``) and left alone, never retried on, never a reason to fail. The subject's
index row is dropped last, once the current object holds no line naming the subject (in a legacy segment:
none of the mention-only lines its index counts either) and its older versions are gone. Each segment is one
resumable unit: a retry after a crash at any point finishes the job and changes nothing more.

Legacy segments: segments shipped before mention keys were recorded (``log_segments.mention_keys`` false)
carry mention-only lines with no ``mentions`` field, yet the old shipper counted them in the mentioned
user's index row. A purge of such a segment judges, once and before it rewrites anything, how many of the
subject's lines the index counts beyond those structure identifies (recorded in the row's
``legacy_mentions``, so a retry acts on the same judgement). Those lines are the subject's when exactly that
many structureless lines of the app carry the subject's identity as one whole token of their text (the
token's subject key is the subject key: exact, never a substring, and never without the index's count to
confirm it); then they are removed with the subject's other lines. When the counts disagree nothing is
guessed: the structured lines go, the index row stays (the verifier fails) until the segment is re-shipped
through ``ship`` with mention keys. A legacy segment whose index counts no such line keeps every other line.

Sealed lines (``stores.logs.sealing``): a line naming a user is shipped with its ``user_id`` and ``msg`` sealed
under the data key of every subject it names, and the owner's subject key in clear (``subject``), so a
purge, the index and the verifier match it by structure without opening anything, and shredding the
user's key makes every older copy unreadable. Such a line is the subject's iff its ``app`` is the subject's
and its ``subject`` is the subject key or the key is among its mentions. Lines shipped before (plain, with a
``user_id``) are still matched by hashing their ``user_id``. Reading (``read``, ``lines_of``) opens sealed
lines; one that cannot be opened is returned marked ``unreadable`` and counted, never an error.

Held writers: a line naming the subject whose writer is under a legal hold is kept (read in the purge's
transaction, under the segment's lock); another writer's kept line is re-sealed in the same rewrite without
the subject's layer, so it stays readable for its writer's hold after the subject's key is shredded
(``stores.logs.held_lines``), and the purge counts which kept lines are readable and which are not.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg_pool import ConnectionPool

from stores.infra.s3_batch import delete_versions
from stores.ledgers.owner_holds import held_subjects
from stores.logs.held_lines import keep_readable
from stores.logs.sealing import SEALED, SUBJECT, UNREADABLE, LineSealer, SealingUnavailable, is_subject_key
from stores.privacy.identity import hash_or_none, session_ref

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from psycopg import Connection

    from stores.adapters.context import StoreContext
    from stores.privacy.keys import DataKeyStore

#: The field holding the subject keys of the users a line mentions (same app as the line).
MENTIONS = "mentions"
#: The field holding the line's session as ``session_ref(owner's subject key, session id)``.
SESSION = "session"
#: ``log_subject_index.legacy_mentions`` when the index counts lines of a legacy segment no rule identifies.
UNIDENTIFIED = -1
#: Punctuation around a word of a legacy line's text that is not part of the identity it names.
_AROUND = "\"'()[]{}<>,.;:!?"


@dataclass(frozen=True)
class LogLine:
    ts: str
    app: str
    user_id: str | None
    level: str
    msg: str
    #: Users the line mentions in its free text (known to the logging code): recorded as subject keys.
    mentioned: tuple[str, ...] = ()
    #: The agent session the line was written in, if any: recorded as ``session_ref`` (a keyed hash), so
    #: one session's lines can be purged (item forgetting's ``erase_session``) and nothing names it in clear.
    session_id: str | None = None

    def mention_keys(self, secret: bytes) -> list[str]:
        keys = {hash_or_none(secret, self.app, u) for u in self.mentioned}
        return sorted(k for k in keys if k)

    def to_json(self, secret: bytes) -> str:
        """The plain form: how every line was shipped before sealing, and how a line naming nobody still is."""
        record: dict[str, Any] = {
            "ts": self.ts,
            "level": self.level,
            "app": self.app,
            "user_id": self.user_id,
            "msg": self.msg,
        }
        keys = self.mention_keys(secret)
        if keys:
            record[MENTIONS] = keys
        owner = hash_or_none(secret, self.app, self.user_id)
        if self.session_id and owner:
            record[SESSION] = session_ref(owner, self.session_id)
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))

    def to_sealed_json(self, secret: bytes, sealer: LineSealer | None) -> str:
        """The shipped form: ``user_id`` and ``msg`` sealed when the line names a user (owner or mention),
        with its subject, mention and session keys in clear; the plain form when it names nobody."""
        owner, keys = hash_or_none(secret, self.app, self.user_id), self.mention_keys(secret)
        if owner is None and not keys:
            return self.to_json(secret)
        if sealer is None:
            raise SealingUnavailable("a log line naming a user needs a data key store to be shipped")
        header: dict[str, Any] = {"ts": self.ts, "level": self.level, "app": self.app}
        if owner:
            header[SUBJECT] = owner
        if keys:
            header[MENTIONS] = keys
        if self.session_id and owner:
            header[SESSION] = session_ref(owner, self.session_id)
        record = sealer.seal(header, {"user_id": self.user_id, "msg": self.msg})
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def segment_key(window_start: datetime, shard: int) -> str:
    return f"logs/{window_start:%Y/%m/%d/%H%M}-shard{shard:02d}.jsonl"


def split_lines(body: bytes) -> list[bytes]:
    """The segment's lines with their line ends, so that joining them gives back ``body`` exactly."""
    parts = body.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


class Verdict(enum.Enum):
    SUBJECT = "subject"  # names the subject: removed by a purge
    OTHER = "other"  # someone else's (or nobody's) well-formed line, or a blank line
    MALFORMED = "malformed"  # not the subject's as far as structure tells, and malformed: kept and counted


class SessionLines:
    """The subject's lines written in one session (its ``session`` field): what ``erase_session`` purges."""

    def __init__(self, subject_lines: SubjectLines, ref: str) -> None:
        self.subject_lines = subject_lines
        self._ref = ref

    def raw(self, line: bytes) -> Verdict:
        verdict = self.subject_lines.raw(line)
        if verdict is not Verdict.SUBJECT:
            return verdict
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return Verdict.MALFORMED
        return Verdict.SUBJECT if record.get(SESSION) == self._ref else Verdict.OTHER


class SubjectLines:
    """Which lines of a segment name one subject (see the module docstring); never raises on bad data."""

    def __init__(self, secret: bytes, app_name: str, subject: str) -> None:
        self._secret = secret
        self._app = app_name
        self._subject = subject
        self._seen: dict[str, str | None] = {}

    def _key_of(self, user_id: str) -> str | None:
        if user_id not in self._seen:
            self._seen[user_id] = hash_or_none(self._secret, self._app, user_id)
        return self._seen[user_id]

    def record(self, record: object) -> Verdict:
        if not isinstance(record, dict):
            return Verdict.MALFORMED
        app, user, mentions = record.get("app"), record.get("user_id"), record.get(MENTIONS, [])
        owner = record.get(SUBJECT)
        bad = not isinstance(app, str) or not (user is None or isinstance(user, str))
        bad = bad or not (owner is None or is_subject_key(owner))
        if not isinstance(mentions, list):
            mentions, bad = [], True
        bad = bad or not all(isinstance(m, str) for m in mentions)
        if app == self._app:
            if self._subject in mentions or owner == self._subject:
                return Verdict.SUBJECT
            if isinstance(user, str):
                key = self._key_of(user)
                if key == self._subject:
                    return Verdict.SUBJECT
                bad = bad or key is None
        return Verdict.MALFORMED if bad else Verdict.OTHER

    def raw(self, line: bytes) -> Verdict:
        if not line.strip():
            return Verdict.OTHER
        try:
            return self.record(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return Verdict.MALFORMED

    def owner(self, line: bytes) -> str | None:
        """The subject key of the user who wrote the line (its clear ``subject``, or its ``user_id`` hashed
        within the line's app), ``None`` when it names no writer: whose hold decides whether it may change."""
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(record, dict):
            return None
        owner, app, user = record.get(SUBJECT), record.get("app"), record.get("user_id")
        if is_subject_key(owner):
            return str(owner)
        if isinstance(app, str) and isinstance(user, str):
            return hash_or_none(self._secret, app, user)
        return None

    def legacy_mention(self, record: object) -> bool:
        """Whether a line with no structure at all (no ``subject``, ``mentions`` or sealed part: how the
        shipper wrote every line before mention keys) of the subject's app carries the subject's identity as
        one whole word of its text: the word's subject key is the subject key, never a substring. Trusted
        only where the subject's index row counts exactly that many such lines (see the module docstring)."""
        if not isinstance(record, dict) or record.get("app") != self._app:
            return False
        if any(field in record for field in (SUBJECT, MENTIONS, SEALED)):
            return False
        msg = record.get("msg")
        if not isinstance(msg, str):
            return False
        return any(
            token and self._key_of(token) == self._subject
            for word in msg.split()
            for token in {word, word.strip(_AROUND)}
        )

    def raw_legacy_mention(self, line: bytes) -> bool:
        if not line.strip():
            return False
        try:
            return self.legacy_mention(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return False


@dataclass(frozen=True)
class SegmentPurge:
    removed: int = 0  # lines naming the subject, removed
    malformed: int = 0  # others' malformed lines, kept byte for byte
    held: int = 0  # lines naming the subject kept: their writer is under a legal hold
    #: of the held lines of other writers: kept readable by their writer (the subject's layer lifted,
    #: ``stores.logs.held_lines``), and kept as they were though sealed under the subject's key as well
    held_readable: int = 0
    held_unreadable: int = 0


@dataclass(frozen=True)
class PurgeTally:
    """What one erasure's purges did, summed over its segments (``LogArchive.tallied``)."""

    segments: int = 0
    lines: int = 0  # lines naming the subject, removed
    malformed: int = 0  # others' malformed lines seen and kept
    held: int = 0  # lines naming the subject kept: their writer is under a legal hold
    held_readable: int = 0  # of them, other writers' lines kept readable (the subject's layer lifted)
    held_unreadable: int = 0  # of them, other writers' lines still sealed under the subject's key as well


@dataclass(frozen=True)
class SegmentRead:
    records: list[dict[str, Any]]  # well-formed lines, sealed ones opened (or marked ``unreadable``)
    malformed: int = 0  # lines that are not UTF-8 or not a JSON object: left out
    unreadable: int = 0  # sealed lines that could not be opened (a shredded key, a damaged ciphertext)


class LogArchive:
    """The archive. ``keys`` seals lines at ship time and opens them on read; without it, lines naming a user
    cannot be shipped (``SealingUnavailable``) and sealed lines read as ``unreadable``. Purges and index
    reads never need it: they match by clear structure only."""

    def __init__(
        self,
        s3: S3Client,
        bucket: str,
        pool: ConnectionPool,
        subject_secret: bytes,
        keys: DataKeyStore | None = None,
    ) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._pool = pool
        self._secret = subject_secret
        self._keys = keys

    def _sealer(self) -> LineSealer | None:
        return LineSealer(self._keys) if self._keys is not None else None

    # ----- shipping -------------------------------------------------------------------------------

    def ship(self, lines: Sequence[LogLine], window_start: datetime, shard: int) -> str:
        key = segment_key(window_start, shard)
        sealer = self._sealer()
        body = "".join(line.to_sealed_json(self._secret, sealer) + "\n" for line in lines).encode("utf-8")
        with self.segment_lock(key):
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        per_subject: dict[str, int] = {}
        for line in lines:
            own = hash_or_none(self._secret, line.app, line.user_id)
            for sk in {k for k in (own, *line.mention_keys(self._secret)) if k}:
                per_subject[sk] = per_subject.get(sk, 0) + 1
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO log_segments (segment_key, window_start, shard, line_count, mention_keys) "
                "VALUES (%s, %s, %s, %s, true) "
                "ON CONFLICT (segment_key) DO UPDATE SET line_count = EXCLUDED.line_count, mention_keys = true",
                (key, window_start, shard, len(lines)),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO log_subject_index (subject_key, segment_key, line_count) VALUES (%s, %s, %s) "
                    "ON CONFLICT (subject_key, segment_key) DO UPDATE SET line_count = EXCLUDED.line_count, "
                    "legacy_mentions = NULL",
                    [(sk, key, n) for sk, n in per_subject.items()],
                )
        return key

    # ----- reading --------------------------------------------------------------------------------

    def segments_of(self, subject: str, window_before: datetime | None = None) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT i.segment_key FROM log_subject_index i JOIN log_segments s USING (segment_key) "
                "WHERE i.subject_key = %s AND (%s::timestamptz IS NULL OR s.window_start < %s) "
                "ORDER BY i.segment_key",
                (subject, window_before, window_before),
            ).fetchall()
        return [r[0] for r in rows]

    def read_raw(self, key: str) -> bytes | None:
        """The segment's bytes, or ``None`` when there is no such object."""
        try:
            return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None

    def read(self, key: str) -> list[dict[str, Any]]:
        """The segment's well-formed lines as records, sealed ones opened (malformed lines are left out)."""
        return self.read_segment(key).records

    def read_segment(self, key: str, keep: SubjectLines | None = None) -> SegmentRead:
        """The segment's well-formed lines (only those ``keep`` names the subject's, when given: no other
        line is opened), with counts of the malformed lines left out and of the sealed lines not opened."""
        records: list[dict[str, Any]] = []
        malformed = unreadable = 0
        sealer = self._sealer()
        for line in split_lines(self.read_raw(key) or b""):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                malformed += 1
                continue
            if not isinstance(record, dict):
                malformed += 1
                continue
            if keep is not None and keep.record(record) is not Verdict.SUBJECT:
                continue
            if SEALED in record:
                record = sealer.open(record) if sealer else {**record, UNREADABLE: True}
                unreadable += bool(record.get(UNREADABLE))
            records.append(record)
        return SegmentRead(records, malformed, unreadable)

    def lines_of(self, subject: str, app_name: str, keys: Iterable[str]) -> list[dict[str, Any]]:
        """The records naming the subject in the given segments, opened (fingerprints and tests)."""
        lines = SubjectLines(self._secret, app_name, subject)
        return [r for key in keys for r in self.read_segment(key, keep=lines).records]

    def old_versions(self, key: str) -> int:
        """Non-current versions and delete markers of one segment object.

        Read under the segment lock: another user's purge puts a new version before it drops the older
        ones, and a check between the two would count a version that is about to go."""
        with self.segment_lock(key):
            listing = self._s3.list_object_versions(Bucket=self._bucket, Prefix=key)
        versions = [v for v in listing.get("Versions", []) if v["Key"] == key and not v.get("IsLatest")]
        markers = [m for m in listing.get("DeleteMarkers", []) if m["Key"] == key]
        return len(versions) + len(markers)

    # ----- purge ----------------------------------------------------------------------------------

    @contextmanager
    def segment_lock(self, key: str) -> Iterator[None]:
        """Serialise read-modify-write of one segment across processes: two erasures purging the same
        segment at once would otherwise each write back the other's lines (a lost update)."""
        with self._locked(key):
            yield

    @contextmanager
    def _locked(self, key: str) -> Iterator[Connection[tuple[Any, ...]]]:
        """:meth:`segment_lock`, giving the connection that holds the lock (the purge's index update uses it)."""
        with self._pool.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7))", (key,))
            try:
                yield conn
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 7))", (key,))

    def purge_segment(self, key: str, app_name: str, user_id: str, subject: str) -> int:
        """Remove the subject's lines from one segment; returns lines removed (0 on a repeat).

        ``user_id`` is not used for matching (identity is the subject key); kept for callers' symmetry."""
        return self.purge_subject(key, app_name, subject).removed

    def purge_subject(self, key: str, app_name: str, subject: str, tally: str | None = None) -> SegmentPurge:
        """Remove every line naming the subject from one segment; everything else stays byte for byte.

        ``tally`` (an erasure's request id): what was removed is recorded for the request in the statement
        that drops the index row (``log_purge_tally``, read by ``tallied``), so the erasure's counts hold
        whichever attempt purged the segment."""
        with self._locked(key) as conn:
            return self._purge_locked(conn, key, SubjectLines(self._secret, app_name, subject), subject, tally)

    def purge_session(self, key: str, app_name: str, subject: str, ref: str) -> SegmentPurge:
        """Remove the subject's lines of one session (``ref``: its ``session_ref``) from one segment; the
        subject's other lines, and everyone else's, stay byte for byte (and so does the index row while the
        segment still holds a line of the subject)."""
        with self._locked(key) as conn:
            matcher = SessionLines(SubjectLines(self._secret, app_name, subject), ref)
            return self._purge_locked(conn, key, matcher, subject)

    def _purge_locked(
        self,
        conn: Connection[tuple[Any, ...]],
        key: str,
        matcher: SubjectLines | SessionLines,
        subject: str,
        tally: str | None = None,
    ) -> SegmentPurge:
        lines = split_lines(self.read_raw(key) or b"")
        verdicts = [matcher.raw(line) for line in lines]
        rule = matcher.subject_lines if isinstance(matcher, SessionLines) else matcher
        judged, legacy = self._legacy_judgement(conn, key, subject, rule, lines)
        mentions_go = judged > 0 and isinstance(matcher, SubjectLines)  # legacy lines belong to no session
        doomed = [v is Verdict.SUBJECT or (mentions_go and legacy[n]) for n, v in enumerate(verdicts)]
        with conn.transaction():  # the writers' hold locks are held until the index statement commits
            # the gate: a line goes only when its writer is not under a legal hold (the subject included: a hold
            # placed between two segments stops the purge at the next), read under the segment's lock in the
            # transaction that records the purge (``stores.ledgers.owner_holds``)
            writers = {n: rule.owner(line) for n, line in enumerate(lines) if doomed[n]}
            held_writers = held_subjects(conn, {w for w in writers.values() if w})
            spared = [n for n, writer in writers.items() if writer in held_writers]
            for n in spared:
                doomed[n] = False
            # another writer's kept line loses the subject's layer, so its writer can still read it once the
            # subject's key is shredded (``stores.logs.held_lines``); a session purge shreds nothing
            others = [n for n in spared if writers[n] != subject] if isinstance(matcher, SubjectLines) else []
            sealer, readable, lifted = self._sealer(), 0, False
            for n in others:
                held_line = keep_readable(lines[n], subject, sealer)
                lifted = lifted or held_line.line != lines[n]
                lines[n], readable = held_line.line, readable + held_line.readable
            kept = [line for line, gone in zip(lines, doomed, strict=True) if not gone]
            removed = len(lines) - len(kept)
            malformed = sum(1 for v, gone in zip(verdicts, doomed, strict=True) if v is Verdict.MALFORMED and not gone)
            current_version: str | None = None
            if removed or lifted:
                put = self._s3.put_object(
                    Bucket=self._bucket, Key=key, Body=b"".join(kept), ContentType="application/x-ndjson"
                )
                current_version = put.get("VersionId")
            self._drop_old_versions(key, current_version)
            # the index row goes last, once the current object holds no line naming the subject (``kept`` is
            # exactly that object: in a legacy segment, none of the mention-only lines its index counts either)
            # and no older version of it is left: a crash before this point leaves the row, and the retry finds
            # the segment through it
            named = judged == UNIDENTIFIED or any(
                rule.raw(line) is Verdict.SUBJECT or (judged > 0 and rule.raw_legacy_mention(line)) for line in kept
            )
            if removed or not named or tally:  # one statement (atomic), on the connection holding the segment's lock
                conn.execute(
                    "WITH unindexed AS (DELETE FROM log_subject_index WHERE %(drop)s AND subject_key = %(s)s "
                    "AND segment_key = %(k)s), recounted AS (UPDATE log_segments SET line_count = %(n)s "
                    "WHERE %(removed)s AND segment_key = %(k)s), tallied AS (INSERT INTO log_purge_tally "
                    "(request_id, segment_key, lines, malformed, held, held_readable, held_unreadable) "
                    "SELECT %(r)s, %(k)s, %(lines)s, %(bad)s, %(held)s, %(readable)s, %(unreadable)s "
                    "WHERE %(r)s::text IS NOT NULL ON CONFLICT (request_id, segment_key) DO UPDATE SET "
                    "lines = log_purge_tally.lines + EXCLUDED.lines, malformed = EXCLUDED.malformed, "
                    "held = EXCLUDED.held, held_readable = EXCLUDED.held_readable, "
                    "held_unreadable = EXCLUDED.held_unreadable) SELECT 1",
                    {
                        "drop": not named,
                        "s": subject,
                        "k": key,
                        "n": sum(1 for ln in kept if ln.strip()),
                        "removed": bool(removed),
                        "r": tally,
                        "lines": removed,
                        "bad": malformed,
                        "held": len(spared),
                        "readable": readable,
                        "unreadable": len(others) - readable,
                    },
                )
        return SegmentPurge(removed, malformed, len(spared), readable, len(others) - readable)

    def _legacy_judgement(
        self,
        conn: Connection[tuple[Any, ...]],
        key: str,
        subject: str,
        rule: SubjectLines,
        lines: list[bytes],
    ) -> tuple[int, list[bool]]:
        """(how many of the subject's mention-only lines a legacy segment holds by its index, which lines are
        structureless lines naming the subject as a whole word); ``(0, [])`` for a segment shipped with
        mention keys or with no index row of the subject. Judged once, recorded before anything changes.

        The index row counts the subject's lines at ship time; those structure identifies are the subject's,
        the rest are mention-only lines. They are identified when exactly that many structureless lines name
        the subject as a whole word; otherwise ``UNIDENTIFIED``. Once judged, the lines so identified only
        ever become fewer (purges remove lines, a re-ship clears the judgement), so a retry removes whichever
        of them are still there."""
        row = conn.execute(
            "SELECT i.line_count, i.legacy_mentions, s.mention_keys FROM log_subject_index i "
            "JOIN log_segments s USING (segment_key) WHERE i.subject_key = %s AND i.segment_key = %s",
            (subject, key),
        ).fetchone()
        if row is None or row[2]:
            return 0, []
        own = [rule.raw(line) is Verdict.SUBJECT for line in lines]
        legacy = [not mine and rule.raw_legacy_mention(line) for line, mine in zip(lines, own, strict=True)]
        if row[1] is not None:
            return int(row[1]), legacy
        unaccounted, found = int(row[0]) - sum(own), sum(legacy)
        judged = 0 if unaccounted <= 0 else (found if found == unaccounted else UNIDENTIFIED)
        conn.execute(
            "UPDATE log_subject_index SET legacy_mentions = %s WHERE subject_key = %s AND segment_key = %s",
            (judged, subject, key),
        )
        return judged, legacy

    def _drop_old_versions(self, key: str, keep_version: str | None) -> None:
        listing = self._s3.list_object_versions(Bucket=self._bucket, Prefix=key)
        doomed: list[dict[str, str]] = []
        for v in listing.get("Versions", []):
            if v["Key"] != key or not v.get("VersionId") or v["VersionId"] == "null":
                continue
            if v["VersionId"] == keep_version or (keep_version is None and v.get("IsLatest")):
                continue
            doomed.append({"Key": key, "VersionId": v["VersionId"]})
        doomed += [
            {"Key": key, "VersionId": m["VersionId"]}
            for m in listing.get("DeleteMarkers", [])
            if m["Key"] == key and m.get("VersionId")
        ]
        delete_versions(self._s3, self._bucket, doomed)

    def session_lines_left(self, app_name: str, subject: str, ref: str) -> int:
        """Lines of the subject's session ``ref`` still in the subject's indexed segments (read directly)."""
        matcher = SessionLines(SubjectLines(self._secret, app_name, subject), ref)
        return sum(
            matcher.raw(line) is Verdict.SUBJECT
            for key in self.segments_of(subject)
            for line in split_lines(self.read_raw(key) or b"")
        )

    def tallied(self, request_id: str) -> PurgeTally:
        """What the erasure ``request_id`` purged with ``tally``, whichever attempt purged each segment."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(lines), 0), coalesce(sum(malformed), 0), coalesce(sum(held), 0), "
                "coalesce(sum(held_readable), 0), coalesce(sum(held_unreadable), 0) "
                "FROM log_purge_tally WHERE request_id = %s",
                (request_id,),
            ).fetchone()
        return PurgeTally(*(int(v) for v in row)) if row else PurgeTally()

    def forget_tally(self, request_id: str) -> int:
        """Drop the request's tally once it has finished (its counts are in its receipt); returns the rows."""
        with self._pool.connection() as conn:
            cursor = conn.execute("DELETE FROM log_purge_tally WHERE request_id = %s", (request_id,))
        return cursor.rowcount

    def purge_user(self, app_name: str, user_id: str, subject: str) -> tuple[int, int]:
        """Purge every indexed segment; returns (segments, lines removed)."""
        keys = self.segments_of(subject)
        return len(keys), sum(self.purge_segment(key, app_name, user_id, subject) for key in keys)


def shared_archive(context: StoreContext) -> LogArchive:
    """The context's log archive: one per process, so the platform's writers and the eraser share its segment lock."""
    return context.shared(
        "logs",
        lambda: LogArchive(context.s3, context.buckets.logs, context.pool, context.subject_secret, context.keys),
    )

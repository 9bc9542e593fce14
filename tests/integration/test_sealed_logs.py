"""Log lines sealed per line under the data keys of the users they name (issue 18, part B).

The raw segment bytes in S3 hold no user id and no words of a line naming a user, yet reading gives them
back; purges stay exact and structural (mention-only lines, sessions, legacy plain lines, others' malformed
lines); once the user's key is shredded, a backup of an old segment version no longer opens the user's lines
(nor lines mentioning the user) while another user's still open, and nothing crashes on them.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from stores.logs.archive import LogArchive, LogLine, SubjectLines, Verdict, segment_key
from stores.logs.reads import SubjectLineRule
from stores.logs.sealing import SEALED, UNREADABLE, SealingUnavailable
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key

pytestmark = pytest.mark.integration


def window() -> datetime:
    """A window no other test ships into (segment keys are per window and shard)."""
    return datetime(2043, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (uuid.uuid4().int % 100_000))


def canary() -> str:
    return f"zq{uuid.uuid4().hex[:12]}word"


def body(platform: Platform, key: str) -> bytes:
    return platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()


def raw_lines(platform: Platform, key: str) -> list[bytes]:
    return [line + b"\n" for line in body(platform, key).split(b"\n") if line]


def line(
    ts: datetime, app: str, user: str | None, msg: str, mentioned: tuple[str, ...] = (), session_id: str | None = None
) -> LogLine:
    return LogLine(ts.isoformat(), app, user, "info", msg, mentioned=mentioned, session_id=session_id)


class Cast:
    """One test's app and users, each with a distinctive id and a canary word."""

    def __init__(self, platform: Platform, name: str) -> None:
        run = uuid.uuid4().hex[:8]
        self.platform, self.app = platform, f"sealed-{name}"
        self.alice, self.bob = f"alice-{run}@example.org", f"bob-{run}@example.org"
        self.words = {self.alice: canary(), self.bob: canary()}

    def sk(self, user: str) -> str:
        return subject_key(self.platform.config.subject_secret, self.app, user)


def test_raw_segments_hold_no_user_id_and_no_words_yet_reads_give_them_back(platform: Platform) -> None:
    c, ts = Cast(platform, "raw"), window()
    a_word, b_word = c.words[c.alice], c.words[c.bob]
    key = platform.logs.ship(
        [
            line(ts, c.app, c.alice, f"asked about {a_word}"),
            line(ts, c.app, None, f"rate limit reached for {c.alice} {a_word}", mentioned=(c.alice,)),
            line(ts, c.app, c.bob, f"bob said {b_word} to {c.alice}", mentioned=(c.alice,)),
            line(ts, c.app, None, "nightly batch finished"),  # names nobody: stays plain
        ],
        ts,
        shard=1,
    )
    raw = body(platform, key)
    for secret in (c.alice, c.bob, a_word, b_word, "rate limit", "asked about"):
        assert secret.encode() not in raw, secret
    records = [json.loads(r) for r in raw_lines(platform, key)]
    assert [r.get("subject") for r in records] == [c.sk(c.alice), None, c.sk(c.bob), None]
    assert [r.get("mentions") for r in records] == [None, [c.sk(c.alice)], [c.sk(c.alice)], None]
    assert all("user_id" not in r and "msg" not in r and SEALED in r for r in records[:3])
    assert (records[3]["user_id"], records[3]["msg"]) == (None, "nightly batch finished")  # plain, as before

    read = platform.logs.read(key)
    assert [(r["user_id"], r["msg"]) for r in read] == [
        (c.alice, f"asked about {a_word}"),
        (None, f"rate limit reached for {c.alice} {a_word}"),
        (c.bob, f"bob said {b_word} to {c.alice}"),
        (None, "nightly batch finished"),
    ]
    assert all(SEALED not in r and UNREADABLE not in r for r in read)
    alice_lines = platform.logs.lines_of(c.sk(c.alice), c.app, [key])
    assert [r["msg"] for r in alice_lines] == [r["msg"] for r in read[:3]]  # own and mention-only lines
    assert [r["msg"] for r in platform.logs.lines_of(c.sk(c.bob), c.app, [key])] == [read[2]["msg"]]
    assert platform.logs.segments_of(c.sk(c.alice)) == [key]
    assert platform.logs.segments_of(c.sk(c.bob)) == [key]


def test_a_purge_removes_exactly_the_subjects_lines_and_keeps_the_rest_byte_for_byte(platform: Platform) -> None:
    c, ts = Cast(platform, "purge"), window()
    secret = platform.config.subject_secret
    key = platform.logs.ship(
        [
            line(ts, c.app, c.alice, f"mine {c.words[c.alice]}", session_id="s-1"),
            line(ts, c.app, c.alice, "mine too", session_id="s-2"),
            line(ts, c.app, c.bob, f"theirs {c.words[c.bob]}", session_id="s-1"),
            line(ts, c.app, None, f"rate limit for {c.alice}", mentioned=(c.alice,)),
            line(ts, c.app, c.bob, f"bob and {c.alice}", mentioned=(c.alice,)),
            line(ts, c.app, None, f"batch about {c.alice} (free text only)"),
            line(ts, "sealed-elsewhere", c.alice, "another app's alice"),
        ],
        ts,
        shard=2,
    )
    sealed = raw_lines(platform, key)
    # lines shipped before sealing (plain, matched by their user_id) and others' malformed lines
    legacy_alice = (line(ts, c.app, c.alice, "legacy mine").to_json(secret) + "\n").encode()
    legacy_bob = (line(ts, c.app, c.bob, "legacy theirs").to_json(secret) + "\n").encode()
    bad = [b"not json\n", b"\xff\xfe not utf-8\n", b'{"app":"%s","subject":"sk_nope","sealed":"x"}\n' % c.app.encode()]
    platform.s3.put_object(
        Bucket=platform.config.log_bucket, Key=key, Body=b"".join([*sealed, legacy_alice, legacy_bob, *bad])
    )
    assert platform.logs.read_segment(key).malformed == 2  # the odd ``subject`` line is JSON: read, not opened

    # one session of alice's: only that line goes (bob's line in a session of the same id stays)
    sk = c.sk(c.alice)
    assert platform.logs.purge_session(key, c.app, sk, session_ref(sk, "s-1")).removed == 1
    assert raw_lines(platform, key) == [*sealed[1:], legacy_alice, legacy_bob, *bad]

    purged = platform.logs.purge_subject(key, c.app, sk)
    assert (purged.removed, purged.malformed) == (4, 3)  # own sealed, mention-only, bob's mention, legacy plain
    assert raw_lines(platform, key) == [sealed[2], sealed[5], sealed[6], legacy_bob, *bad]
    assert platform.logs.segments_of(sk) == []
    assert platform.logs.purge_subject(key, c.app, sk).removed == 0  # idempotent
    assert [r["msg"] for r in platform.logs.lines_of(c.sk(c.bob), c.app, [key])] == [
        f"theirs {c.words[c.bob]}",
        "legacy theirs",
    ]


def test_after_the_key_is_shredded_a_backup_of_an_old_version_no_longer_opens(platform: Platform) -> None:
    c, ts = Cast(platform, "shred"), window()
    key = platform.logs.ship(
        [
            line(ts, c.app, c.alice, f"mine {c.words[c.alice]}"),
            line(ts, c.app, c.bob, f"theirs {c.words[c.bob]}"),
            line(ts, c.app, c.bob, f"bob mentions {c.alice}", mentioned=(c.alice,)),
            line(ts, c.app, None, "nobody's"),
        ],
        ts,
        shard=3,
    )
    bucket = platform.config.log_bucket
    version = platform.s3.head_object(Bucket=bucket, Key=key)["VersionId"]
    backup = platform.s3.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()  # a bucket backup
    sk = c.sk(c.alice)
    assert platform.logs.purge_subject(key, c.app, sk).removed == 2
    versions = platform.s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])
    assert version not in [v["VersionId"] for v in versions if v["Key"] == key]  # the old version was dropped ...
    assert platform.keys.shred(sk) >= 1  # ... but the store keeps it on disk until compaction: shred the key

    restored = segment_key(ts, 90)  # the backup, restored beside the live segment
    platform.s3.put_object(Bucket=bucket, Key=restored, Body=backup)
    got = platform.logs.read_segment(restored)
    assert got.unreadable == 2  # alice's line and bob's line mentioning her
    assert [r.get(UNREADABLE, False) for r in got.records] == [True, False, True, False]
    assert got.records[1]["msg"] == f"theirs {c.words[c.bob]}"  # another user's line still opens
    assert got.records[3]["msg"] == "nobody's"
    assert c.alice.encode() not in backup
    assert c.words[c.alice].encode() not in backup
    assert all("msg" not in r and "user_id" not in r for r in got.records if r.get(UNREADABLE))
    # reading, purging and checking such a copy never crash: identity is structural, nothing is opened to match
    assert [r[UNREADABLE] for r in platform.logs.lines_of(sk, c.app, [restored])] == [True, True]
    assert SubjectLineRule(platform.config.subject_secret, c.app, sk).scan(backup).subject_lines == 2
    assert platform.logs.purge_subject(restored, c.app, sk).removed == 2
    assert raw_lines(platform, restored) == backup.splitlines(keepends=True)[1::2]


def test_a_ciphertext_moved_to_another_line_or_a_changed_header_does_not_open(platform: Platform) -> None:
    c, ts = Cast(platform, "aad"), window()
    key = platform.logs.ship(
        [line(ts, c.app, c.alice, "first"), line(ts, c.app, c.alice, "second"), line(ts, c.app, c.bob, "third")],
        ts,
        shard=4,
    )
    first, second, third = (json.loads(r) for r in raw_lines(platform, key))
    swapped = {**first, SEALED: second[SEALED]}  # same user, another line's ciphertext
    reowned = {**third, "subject": first["subject"]}  # bob's ciphertext under alice's subject key
    truncated = {**first, SEALED: base64.b64encode(base64.b64decode(first[SEALED])[:-1]).decode()}
    planted = [json.dumps(r).encode() + b"\n" for r in (first, swapped, reowned, truncated)]
    platform.s3.put_object(Bucket=platform.config.log_bucket, Key=key, Body=b"".join(planted))
    got = platform.logs.read_segment(key)
    assert got.unreadable == 3
    assert [r.get("msg") for r in got.records] == ["first", None, None, None]


def test_without_a_key_store_a_line_naming_a_user_is_refused_and_nothing_is_written(platform: Platform) -> None:
    c, ts = Cast(platform, "nokeys"), window()
    bare = LogArchive(platform.s3, platform.config.log_bucket, platform.pool, platform.config.subject_secret)
    with pytest.raises(SealingUnavailable):
        bare.ship([line(ts, c.app, None, "ok"), line(ts, c.app, c.alice, "private")], ts, shard=5)
    assert bare.read_raw(segment_key(ts, 5)) is None
    with pytest.raises(SealingUnavailable):
        bare.ship([line(ts, c.app, None, f"for {c.alice}", mentioned=(c.alice,))], ts, shard=5)
    key = bare.ship([line(ts, c.app, None, "names nobody")], ts, shard=5)
    assert [r["msg"] for r in bare.read(key)] == ["names nobody"]
    # a sealed segment read without keys: the lines are there, unopened
    sealed = platform.logs.ship([line(ts, c.app, c.alice, "private")], ts, shard=6)
    assert bare.read_segment(sealed).unreadable == 1


# ----- the rule on sealed headers: the eraser's and the verifier's agree --------------------------------

SECRET = b"unit-test-secret-0123456789abcdef"
APP = "shop"


def sk_of(user: str, app: str = APP) -> str:
    return subject_key(SECRET, app, user)


def sealed_line(**fields: object) -> bytes:
    return json.dumps({"ts": "t", "level": "info", "lid": "0" * 16, SEALED: "AAAA", **fields}).encode()


RULE_CASES: list[tuple[str, bytes, Verdict]] = [
    ("own sealed line", sealed_line(app=APP, subject=sk_of("bob")), Verdict.SUBJECT),
    ("another subject", sealed_line(app=APP, subject=sk_of("bobby")), Verdict.OTHER),
    ("same subject key, another app", sealed_line(app="crm", subject=sk_of("bob")), Verdict.OTHER),
    ("sealed mention", sealed_line(app=APP, subject=sk_of("c"), mentions=[sk_of("bob")]), Verdict.SUBJECT),
    ("sealed mention-only", sealed_line(app=APP, mentions=[sk_of("bob")]), Verdict.SUBJECT),
    ("not a subject key", sealed_line(app=APP, subject="bob"), Verdict.MALFORMED),
    ("a subject key and a newline", sealed_line(app=APP, subject=sk_of("c") + "\n"), Verdict.MALFORMED),
    ("a number as subject", sealed_line(app=APP, subject=7), Verdict.MALFORMED),
    ("odd subject, still a mention", sealed_line(app=APP, subject=7, mentions=[sk_of("bob")]), Verdict.SUBJECT),
]


@pytest.mark.parametrize(("case", "raw", "expected"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_both_rules_judge_sealed_lines_by_their_clear_keys(case: str, raw: bytes, expected: Verdict) -> None:
    assert SubjectLines(SECRET, APP, sk_of("bob")).raw(raw) is expected, case
    scan = SubjectLineRule(SECRET, APP, sk_of("bob")).scan(raw + b"\n")
    assert (scan.subject_lines, scan.malformed_lines) == (
        int(expected is Verdict.SUBJECT),
        int(expected is Verdict.MALFORMED),
    ), case

"""A log line is a subject's by structure only: its ``user_id`` (same app) or its recorded mention keys.

The eraser's rule (``stores.logs.archive.SubjectLines``) and the verifier's own (``stores.logs.reads``) are
written apart; both are held to the same table here.
"""

from __future__ import annotations

import json

import pytest

from stores.logs.archive import LogLine, SubjectLines, Verdict, split_lines
from stores.logs.reads import SubjectLineRule
from stores.privacy.identity import subject_key

SECRET = b"unit-test-secret-0123456789abcdef"
APP = "shop"


def sk(user: str, app: str = APP) -> str:
    return subject_key(SECRET, app, user)


def js(**fields: object) -> bytes:
    return json.dumps({"ts": "t", "level": "info", **fields}).encode()


CASES: list[tuple[str, str, bytes, Verdict]] = [
    ("own line", "12345", js(app=APP, user_id="12345", msg="login"), Verdict.SUBJECT),
    (
        "another user's text naming a number",
        "12345",
        js(app=APP, user_id="c", msg="order 12345 shipped"),
        Verdict.OTHER,
    ),
    ("nobody's text naming the id", "12345", js(app=APP, user_id=None, msg="batch 12345"), Verdict.OTHER),
    ("same id, another app", "alice@example.org", js(app="crm", user_id="alice@example.org", msg="x"), Verdict.OTHER),
    (
        "mention in another app",
        "alice@example.org",
        js(app="crm", user_id="d", msg="to alice@example.org", mentions=[sk("alice@example.org", "crm")]),
        Verdict.OTHER,
    ),
    ("recorded mention", "bob", js(app=APP, user_id=None, msg="rate limit", mentions=[sk("bob")]), Verdict.SUBJECT),
    ("mention among others", "bob", js(app=APP, user_id="c", msg="m", mentions=[sk("c"), sk("bob")]), Verdict.SUBJECT),
    ("free-text mention only", "bob", js(app=APP, user_id="c", msg="rate limit reached for bob"), Verdict.OTHER),
    ("a longer id", "bob", js(app=APP, user_id="bobby", msg="x", mentions=[sk("bobby")]), Verdict.OTHER),
    ("trailing space is another id", "bob", js(app=APP, user_id="bob ", msg="x"), Verdict.OTHER),
    ("not JSON", "bob", b"bob did something", Verdict.MALFORMED),
    ("not UTF-8", "bob", b'{"app":"shop","user_id":"bob\xff"}', Verdict.MALFORMED),
    ("not an object", "bob", b'["shop", "bob"]', Verdict.MALFORMED),
    ("a number as user id", "bob", js(app=APP, user_id=42, msg="x"), Verdict.MALFORMED),
    ("an empty user id", "bob", js(app=APP, user_id="", msg="x"), Verdict.MALFORMED),
    ("a lone surrogate", "bob", b'{"app":"shop","user_id":"\\ud800","msg":"x"}', Verdict.MALFORMED),
    ("too long to be an id", "bob", js(app=APP, user_id="x" * 300, msg="x"), Verdict.MALFORMED),
    ("mentions not a list", "bob", js(app=APP, user_id="c", mentions="bob"), Verdict.MALFORMED),
    ("no app", "bob", js(user_id="bob", msg="x"), Verdict.MALFORMED),
    ("blank", "bob", b"   ", Verdict.OTHER),
]


@pytest.mark.parametrize(("case", "user", "line", "expected"), CASES, ids=[c[0] for c in CASES])
def test_eraser_rule(case: str, user: str, line: bytes, expected: Verdict) -> None:
    assert SubjectLines(SECRET, APP, sk(user)).raw(line) is expected, case


@pytest.mark.parametrize(("case", "user", "line", "expected"), CASES, ids=[c[0] for c in CASES])
def test_verifier_rule_agrees(case: str, user: str, line: bytes, expected: Verdict) -> None:
    scan = SubjectLineRule(SECRET, APP, sk(user)).scan(line + b"\n")
    assert (scan.subject_lines, scan.malformed_lines) == (
        int(expected is Verdict.SUBJECT),
        int(expected is Verdict.MALFORMED),
    ), case


def test_the_shipper_records_mention_keys_never_the_raw_ids() -> None:
    line = LogLine("t", APP, None, "warning", "rate limit reached for bob", mentioned=("bob", "carol", "bob"))
    record = json.loads(line.to_json(SECRET))
    assert record["mentions"] == sorted([sk("bob"), sk("carol")])
    assert "bob" not in json.dumps(record["mentions"])
    assert "mentions" not in json.loads(LogLine("t", APP, "bob", "info", "x").to_json(SECRET))


def test_an_id_no_identity_could_have_is_not_recorded_as_a_mention() -> None:
    record = json.loads(LogLine("t", APP, None, "info", "x", mentioned=("", "ok")).to_json(SECRET))
    assert record["mentions"] == [sk("ok")]


def test_split_lines_gives_back_the_exact_bytes() -> None:
    for body in (b"", b"a\n", b"a\nb", b"a\n\n\xffb\r\n", b"\n\n"):
        assert b"".join(split_lines(body)) == body

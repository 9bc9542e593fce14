from __future__ import annotations

import json

import pytest
import structlog

from workers.logging_setup import REDACTED, configure_logging, refuse_raw_identifiers, sensitive


def test_forbidden_fields_are_redacted() -> None:
    out = refuse_raw_identifiers(None, "info", {"event": "x", "user_id": "alice", "subject": "sk_1"})
    assert out == {"event": "x", "user_id": REDACTED, "subject": "sk_1"}


def test_registered_raw_values_are_masked_everywhere() -> None:
    with sensitive("alice@example.com"):
        out = refuse_raw_identifiers(
            None, "info", {"event": "erasing alice@example.com", "nested": {"k": ["alice@example.com!"]}}
        )
    assert "alice" not in json.dumps(out)
    after = refuse_raw_identifiers(None, "info", {"event": "alice@example.com"})
    assert after["event"] == "alice@example.com"  # only while registered


def test_configured_logger_never_prints_the_raw_id(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")
    log = structlog.get_logger("t")
    with sensitive("u-12345"):
        log.info("step done for u-12345", user_id="u-12345", subject_key="sk_abc", count=3)
    err = capsys.readouterr().err
    assert "u-12345" not in err
    line = json.loads(err.strip().splitlines()[-1])
    assert line["subject_key"] == "sk_abc"
    assert line["count"] == 3


def test_standard_library_loggers_go_through_the_redaction_processor(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12: the SDK, botocore and psycopg log through the standard library; those lines bypassed the
    processor that masks raw ids (basicConfig printed them as they came)."""
    import logging

    configure_logging("json")
    try:
        raise ValueError("no such row for u-98765")
    except ValueError:
        with sensitive("u-98765"):
            logging.getLogger("temporalio.activity").warning("activity failed for u-98765", exc_info=True)
    err = capsys.readouterr().err
    assert "activity failed for" in err
    assert "no such row for" in err  # the traceback is there, masked
    assert "u-98765" not in err

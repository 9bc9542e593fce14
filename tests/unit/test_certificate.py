"""The receipt's certificate in words (``console.certificate``) and as a PDF (``console.certificate_pdf``), on
receipts as they are signed: the stored legacy receipt (signed before RFC 8785, ``window_minutes`` a float)
verified with its own key, and bodies changed where the words must change (a failed check, a count nobody
named, a hold)."""

from __future__ import annotations

import copy
import json
import re
import zlib
from pathlib import Path
from typing import Any

from console.certificate import certificate
from console.certificate_pdf import certificate_pdf, plain
from console.certificate_words import duration, words
from verifier.receipts.attestation import PhysicalView
from verifier.receipts.signing import load_public_key, verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "receipts"
PEM = (FIXTURES / "legacy_public_key.pem").read_text()


def _legacy() -> tuple[dict[str, Any], dict[str, Any]]:
    document = json.loads((FIXTURES / "legacy_receipt.json").read_text())
    return document, verify(document, load_public_key(PEM))


def _text(pdf: bytes) -> str:
    shown = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        try:
            content = zlib.decompress(stream)
        except zlib.error:
            continue
        shown += [m.decode("latin-1") for m in re.findall(rb"\(((?:\\.|[^\\)])*)\)\s*Tj", content, re.S)]
    return " ".join(" ".join(shown).replace("\\(", "(").replace("\\)", ")").split())


def test_a_legacy_receipt_reads_in_words_with_its_minutes_window_and_only_the_python_checker() -> None:
    document, body = _legacy()
    cert = certificate(document, body, PEM, PhysicalView("pending", "2031-03-01T12:08:00+00:00"))
    stores = {s.store: s for s in cert.stores}
    assert stores["sessions"].erased == ["96 session events", "8 sessions", "1 user-state record"]
    assert stores["artifacts"].erased == ["24 artifact versions (every version and delete marker)"]
    assert stores["memory"].erased == ["37 memory rows (with their embeddings)", "2 derived summaries"]
    assert stores["logs"].erased == ["36 log lines"]
    assert stores["logs"].notes == ["6 log segments rewritten"]  # how, not what: never called erased
    assert stores["keys"].what == "Made unreadable: the key that opens it was destroyed"
    assert cert.window == "5 minutes"  # window_minutes 5.0, the float receipts carried before RFC 8785
    assert "due by 2031-03-01 12:08 UTC (within 5 minutes of the erasure)" in cert.physical
    assert cert.holds == [
        "A legal hold was placed at 2031-03-01 12:00 UTC.",
        "The legal hold was released at 2031-03-01 12:00 UTC.",
    ]
    assert cert.heading == "Certificate of erasure"
    assert cert.due_met
    sig = cert.signature
    assert (sig.algorithm, sig.key_id, sig.rfc8785) == ("Ed25519", "bca2fe5d2e4610bc", False)
    assert sig.canonicalization.startswith("legacy")
    assert sig.commands == ["erasure receipt verify receipt-er_0123456789abcdef0123.json --public-key public.pem"]


def test_a_failed_check_an_unknown_count_and_a_held_count_are_said_as_what_they_are() -> None:
    document, body = _legacy()
    body = copy.deepcopy(body)
    final = body["verifications"][-1]
    memory = next(c for c in final["checks"] if c["check"] == "memory")
    memory.update(passed=False, detail="rows left", counts={"rows_of_user": 2, "rows_naming_erased": 0})
    final["passed"] = False
    logs = next(d for d in body["dispositions"] if d["store"] == "logs")
    logs["counts"] = {"lines": 3, "widgets_polished": 4, "lines_held": 2, "lines_held_readable": 2}
    cert = certificate(document, body, PEM, PhysicalView("done", attested_at="2031-03-01T12:05:00+00:00", run_id="r1"))
    assert cert.heading == "Erasure receipt: completed"  # a failed check: no certificate of erasure
    stores = {s.store: s for s in cert.stores}
    assert "Final check, after the second sweep: FAILED (rows left; rows of user: 2)" in stores["memory"].checks
    assert not stores["memory"].passed
    assert stores["logs"].erased == ["3 log lines"]  # the unknown count is not claimed as erased
    assert stores["logs"].notes == ["widgets polished: 4"]
    assert stores["logs"].held == [
        "2 log lines written by people under a legal hold (kept)",
        "2 of those, kept readable by their writers",
    ]
    assert cert.held_anywhere
    assert cert.physical == "Done at 2031-03-01 12:05 UTC by run r1; within the window: unknown."


def test_the_pdf_says_what_the_page_says_in_latin_1() -> None:
    document, body = _legacy()
    cert = certificate(document, body, PEM, PhysicalView("pending", "2031-03-01T12:08:00+00:00"))
    pdf = certificate_pdf(cert)
    assert pdf.startswith(b"%PDF-")
    text = _text(pdf)
    for phrase in (
        "Certificate of erasure",
        "Request er_0123456789abcdef0123",
        "96 session events, 8 sessions, 1 user-state record",
        "37 memory rows (with their embeddings), 2 derived summaries",
        "memory: passed (no row, no copy - canaries matched nothing)",  # the em dash, in Latin-1
        "legacy (sorted-key JSON, signed before RFC 8785)",
        "bca2fe5d2e4610bc",
        "-----BEGIN PUBLIC KEY-----",
    ):
        assert phrase in text, (phrase, text)
    assert "node verifier/node/verify.mjs" not in text  # it does not judge a legacy receipt


def test_words_and_durations() -> None:
    assert words({"events": 0, "sessions": 1}).erased == ["1 session"]  # zeros say nothing
    assert words({"delete_requests": 3, "resumed_from_heartbeat": 1}).erased == []  # mechanics, not erasures
    assert words({"odd_held_thing": 1}).held == ["odd held thing: 1"]
    assert [duration(s) for s in (300, 86400, 5400, 90, 1)] == [
        "5 minutes",
        "1 day",
        "90 minutes",
        "90 seconds",
        "1 second",
    ]
    assert plain("a \u2014 b \u2264 c \u4e2d") == "a - b <= c ?"

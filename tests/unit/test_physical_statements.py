"""Issue 39, item 5: the physical attestation says per store what its pass did to the bytes, in exact words.

Pure: the judgement of SeaweedFS's evidence (a read-only volume is never counted as compacted), each physical
store's statement (no pass claims to overwrite; every place copies remain is named, until when; an erasure's
sealed copies carry the key-epoch bound, a forget's say the key is live), the keys table's statement from
what ``physical_keys`` did, and the attestation body carrying them, valid against the receipt schema's
``physical_attestation``. The raw-file side is ``tests/integration/test_physical_claims.py``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from stores.adapters.interface import Coverage
from stores.books.physical_pending import Pending
from stores.infra.seaweedfs import Volume
from stores.physical import statements
from stores.physical.compaction import CompactionAdapter
from stores.physical.evidence import Baseline, Judgement, judge_volumes
from stores.physical.statements import StoreStatement, keys_statement, statement_of
from stores.physical.vacuum import VacuumAdapter
from verifier.receipts.attestation import attestation_body

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "verifier" / "receipts" / "receipt_schema.json").read_text())
T0 = datetime(2031, 3, 1, 12, 0, tzinfo=UTC)
BOUND = T0 + timedelta(days=67)


def test_a_read_only_volume_left_uncompacted_is_never_counted_as_compacted() -> None:
    baseline = Baseline("object_store", T0, {"vs:8080/3": {"revision": 2, "read_only": False}})
    full = Volume("vs:8080", 3, "artifacts", 10, 1, 2, True)  # filled up since: SeaweedFS skips it on a sweep
    judged = judge_volumes(baseline, None, {("vs:8080", 3): full})
    assert not judged.covered
    assert judged.read_only == ("vs:8080/3",)
    assert "read-only, not compacted" in judged.not_covered["vs:8080/3"]
    was_read_only = Baseline("object_store", T0, {"vs:8080/3": {"revision": 2, "read_only": True}})
    assert not judge_volumes(was_read_only, None, {("vs:8080", 3): full}).covered
    compacted = Volume("vs:8080", 3, "artifacts", 0, 0, 3, True)  # its revision moved: compacted
    assert judge_volumes(was_read_only, None, {("vs:8080", 3): compacted}).covered


class _Bare:
    """A physical store's adapter built without its context (``statement`` reads only its own settings)."""


def vacuum() -> VacuumAdapter:
    return VacuumAdapter.__new__(VacuumAdapter)


def compaction(offered: bool) -> CompactionAdapter:
    adapter = CompactionAdapter.__new__(CompactionAdapter)
    adapter.master = object() if offered else None  # type: ignore[assignment]
    return adapter


def all_statements(kind: str) -> list[StoreStatement]:
    bound = BOUND if kind == "erasure" else None
    covered = Coverage(True, "", {"before": {"vs:8080/3": {"revision": 2}}})
    out = [
        vacuum().statement(kind, covered, bound),
        compaction(True).statement(kind, covered, bound),
        compaction(False).statement(kind, covered, bound),
        statement_of("planted", _Bare(), kind, covered, bound),
    ]
    for table in ({"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}, {"vacuum_full": "refused"}, {}):
        out.append(keys_statement(table, bound))
    return out


def overclaims(text: str) -> list[str]:
    """Every "overwritten"/"removed"/"gone"/"erased from" claim not negated just before it."""
    found = []
    for m in re.finditer(r"\b(overwritten|physically removed|gone from disk|bytes removed|wiped)\b", text):
        before = text[max(0, m.start() - 12) : m.start()]
        if "not " not in before:
            found.append(text[max(0, m.start() - 40) : m.end()])
    return found


@pytest.mark.parametrize("kind", ["erasure", "forget"])
def test_no_statement_claims_the_bytes_overwritten_and_every_one_names_where_copies_remain(kind: str) -> None:
    for said in all_statements(kind):
        body = said.as_dict()
        assert body["bytes_overwritten"] is False, said.store
        assert said.remains, said.store
        assert said.places <= set(statements.PLACES), said.places
        claims = f"{said.done}. {said.content}"  # what was done (a copy's "until" names a future overwrite)
        assert not overclaims(claims), (said.store, overclaims(claims))
        assert all(c.until for c in said.remains), said.store


def test_the_postgres_statement_says_space_freed_not_overwritten_and_names_heap_toast_index_and_wal() -> None:
    said = vacuum().statement("erasure", Coverage(True), BOUND)
    assert {"heap_pages", "toast_pages", "index_pages", "wal", "wal_archives_and_backups"} <= said.places
    assert "bytes not overwritten" in said.done
    assert "key shredded" in said.text() or "erasure shredded" in said.content
    assert "in clear" in said.content  # rows a writer left unsealed: their content is in clear there
    assert said.readable_until == BOUND
    assert BOUND.isoformat() in said.text()


def test_a_forget_says_the_key_is_live_and_gives_no_unreadable_bound() -> None:
    said = vacuum().statement("forget", Coverage(True), None)
    assert "does not shred" in said.content
    assert said.readable_until is None


def test_the_keys_statement_follows_what_the_job_did_to_the_keys_table() -> None:
    full = keys_statement({"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}, BOUND)
    assert "VACUUM FULL into new files (the old files unlinked, their bytes not overwritten)" in full.done
    assert {"unlinked_files", "wal", "wal_archives_and_backups"} == full.places
    assert BOUND.isoformat() in full.content
    refused = keys_statement({"vacuum_full": "refused", "switch_wal": "done", "checkpoint": "done"}, BOUND)
    assert "not rewritten (VACUUM FULL refused)" in refused.done
    assert "heap_pages" in refused.places
    off = keys_statement({}, BOUND)
    assert "the WAL not switched" in off.done


def test_the_attestation_carries_the_statements_and_matches_the_schema() -> None:
    pending = Pending("er_0123456789abcdef0123", "erasure", T0, T0 + timedelta(days=1))
    coverage = {"vacuum": Coverage(True, "", {"baseline_at": T0.isoformat()})}
    said = all_statements("erasure")[:3]
    body = attestation_body(
        pending,
        "ab" * 32,
        "physical-cleanup-1",
        T0 + timedelta(minutes=1),
        coverage,
        T0 + timedelta(minutes=2),
        BOUND,
        {"name": "erasure-orchestrator", "version": "0"},
        {"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"},
        said,
    )
    assert [s["store"] for s in body["statements"]] == sorted(s.store for s in said)
    schema: dict[str, Any] = {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/physical_attestation"}
    jsonschema.validate(body, schema)
    places = SCHEMA["$defs"]["physical_statement"]["properties"]["remains"]["items"]["properties"]["where"]["enum"]
    assert sorted(places) == sorted(statements.PLACES)


def test_a_receipts_note_names_no_volume_servers_address() -> None:
    """Issue 40 item 7: a compaction check that failed during the erasure put ``host:port/id`` into the
    signed receipt a requester reads; its note now says ``volume id``."""
    judged = Judgement(
        not_covered={"10.1.2.3:8080/3": "read-only, not compacted since", "vs-7.internal:18080/12": "not yet"},
        read_only=("10.1.2.3:8080/3",),
    )
    assert judged.receipt_note() == "volume 3: read-only, not compacted since; volume 12: not yet"
    assert "10.1.2.3" in judged.note()  # the operator's note (the attestation's evidence) keeps them

"""The receipt's certificate: the signed receipt said in plain words, for the console's page and its PDF.

The signed receipt is exact and complete, and written for machines. Its certificate says the same to a data
subject, a regulator or anyone without this project: per store what was erased (``12 session events``),
what was kept for someone under a legal hold, how it was checked and with what result, when physical
removal is due or by which run it was done, and how the signature can be checked independently. It is built
here from the verified body only (no I/O), so the page (``console/templates/receipt.html``) and the PDF
(``console.certificate_pdf``) cannot say different things. A receipt whose signature does not verify gets
no certificate: nothing it says is shown as fact. Everything in it is from the receipt (request id, subject
key, store names, counts, times) or the console's own checks: no raw user id, nothing personal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.attestation_view import scrub
from console.certificate_words import CHECKS, PHASES, WHAT, duration, store_title, words
from verifier.receipts.attestation import PhysicalView
from verifier.receipts.signing import CANONICALIZATION, digest

CLI_VERIFY = "erasure receipt verify {file} --public-key public.pem"
NODE_VERIFY = "node verifier/node/verify.mjs {file} public.pem"


@dataclass(frozen=True)
class StoreSection:
    store: str
    title: str
    what: str
    erased: list[str]
    held: list[str]
    notes: list[str]
    remains: str
    checks: list[str]  # "First check, right after the erasure: passed (nothing left)"
    passed: bool  # every check of this store passed (False when none ran)


@dataclass(frozen=True)
class Check:
    name: str  # the check's name: a store's, or another check's (``fence``)
    label: str  # in words
    passed: bool
    said: str  # "passed: nothing left" / "FAILED: ..."


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    passed: bool
    checks: list[Check]


@dataclass(frozen=True)
class Signature:
    algorithm: str
    key_id: str
    canonicalization: str  # in words
    rfc8785: bool  # checkable by the Node verifier (a legacy receipt: ``erasure receipt verify`` only)
    receipt_sha256: str
    public_key_pem: str
    commands: list[str]


@dataclass(frozen=True)
class Attested:
    """The physical attestation in words (the redacted view for a requester: no evidence, no addresses)."""

    valid: bool
    linked: bool
    run_id: str
    attested_at: str
    within_window: str
    stores: list[str]  # "postgres: covered"
    statements: list[str]
    key_unwrappable_by: str


@dataclass(frozen=True)
class Certificate:
    request_id: str
    subject_key: str
    app_name: str
    status: str
    heading: str
    outcome: str
    received_at: str
    completed_at: str
    due_at: str
    due: str  # "met: completed before the due date" / "MISSED: ..."
    due_met: bool
    stores: list[StoreSection]
    held_anywhere: bool
    holds: list[str]
    second_sweep: str
    phases: list[Phase]
    physical: str  # in words
    physical_line: str  # the short form the console and the CLI print ("pending (due by ...)")
    window: str
    signature: Signature
    attestation: Attested | None
    file_name: str


def when(value: Any) -> str:
    """An ISO time as a reader writes it: ``2026-12-08 00:52 UTC`` (the time as given when it is not one)."""
    if not isinstance(value, str) or not value:
        return "not recorded"
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return value
    if t.utcoffset() is None:
        return t.strftime("%Y-%m-%d %H:%M")
    return t.strftime("%Y-%m-%d %H:%M UTC") if not t.utcoffset() else t.strftime("%Y-%m-%d %H:%M %z")


def _window(physical: Mapping[str, Any]) -> str:
    """The receipt's physical window: ``window_seconds`` (an integer, since RFC 8785) or, in receipts signed
    before, ``window_minutes`` (a float)."""
    seconds = physical.get("window_seconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        return duration(seconds)
    minutes = physical.get("window_minutes")
    if isinstance(minutes, (int, float)) and not isinstance(minutes, bool):
        return duration(round(minutes * 60))
    return ""


def _physical(view: PhysicalView | None, window: str) -> str:
    if view is None:
        return "not recorded"
    within = f" (within {window} of the erasure)" if window else ""
    if view.state == "pending":
        late = " It is OVERDUE." if view.overdue else ""
        return (
            "Pending: the platform's clean-up job removes the deleted bytes from database pages, the write-ahead "
            f"log and the object store's volume files, due by {when(view.due_by)}{within}.{late}"
        )
    if view.state == "done":
        in_window = {True: "yes", False: "NO", None: "unknown"}[view.within_window]
        return f"Done at {when(view.attested_at)} by run {view.run_id}; within the window: {in_window}."
    if view.state == "in_saga":
        return "Done within the erasure itself (its plan vacuumed the tables and compacted the volumes)."
    if view.state == "not_needed":
        return "Not needed: nothing was deleted."
    return "Not recorded: this receipt predates the platform's physical clean-up job."


def _check(c: Mapping[str, Any]) -> Check:
    name = str(c.get("check"))
    passed = c.get("passed") is True
    detail = c.get("detail")
    found = [f"{k.replace('_', ' ')}: {v}" for k, v in (c.get("counts") or {}).items() if v]
    text = detail if isinstance(detail, str) and detail else ""
    why = "; ".join(([text] if text else []) + ([] if passed else found))
    said = ("passed" if passed else "FAILED") + (f" ({why})" if why else "")
    return Check(name, CHECKS.get(name, name), passed, said)


def _phases(body: Mapping[str, Any]) -> list[Phase]:
    out = []
    for p in body.get("verifications") or []:
        name = str(p.get("phase"))
        checks = [_check(c) for c in p.get("checks") or [] if isinstance(c, Mapping)]
        out.append(Phase(name, PHASES.get(name, f"Check '{name}'"), p.get("passed") is True, checks))
    return out


def _stores(body: Mapping[str, Any], phases: list[Phase]) -> list[StoreSection]:
    out = []
    for d in body.get("dispositions") or []:
        store = str(d.get("store"))
        said = words(d.get("counts") or {})
        mine = [(p, c) for p in phases for c in p.checks if c.name == store]
        out.append(
            StoreSection(
                store=store,
                title=store_title(store),
                what=WHAT.get(str(d.get("what")), str(d.get("what"))),
                erased=said.erased,
                held=said.held,
                notes=said.notes,
                remains=str(d.get("remains") or ""),
                checks=[f"{p.title}: {c.said}" for p, c in mine] or ["not checked"],
                passed=bool(mine) and all(c.passed for _p, c in mine),
            )
        )
    return out


def _holds(body: Mapping[str, Any]) -> list[str]:
    said = {"placed": "A legal hold was placed", "released": "The legal hold was released"}
    return [
        f"{said.get(str(h.get('action')), str(h.get('action')))} at {when(h.get('at'))}."
        for h in body.get("holds") or []
        if isinstance(h, Mapping)
    ]


def _second_sweep(body: Mapping[str, Any]) -> str:
    found = words(body.get("second_sweep") or {})
    things = found.erased + found.notes
    if things:
        return "The second sweep, after the longest ingestion delay, found and removed: " + ", ".join(things) + "."
    return "The second sweep, after the longest ingestion delay, found nothing new."


def _signature(document: Mapping[str, Any], body: dict[str, Any], public_key_pem: str, file_name: str) -> Signature:
    sig = document.get("signature") or {}
    rfc = body.get("canonicalization") == CANONICALIZATION
    commands = [CLI_VERIFY.format(file=file_name)] + ([NODE_VERIFY.format(file=file_name)] if rfc else [])
    return Signature(
        algorithm=str(sig.get("alg")),
        key_id=str(sig.get("key_id")),
        canonicalization="RFC 8785 (the JSON Canonicalization Scheme)"
        if rfc
        else "legacy (sorted-key JSON, signed before RFC 8785)",
        rfc8785=rfc,
        receipt_sha256=digest({"receipt": body}),
        public_key_pem=public_key_pem,
        commands=commands,
    )


def _attested(body: Mapping[str, Any] | None, valid: bool, linked: bool) -> Attested | None:
    if body is None:
        return None
    run = body.get("run") or {}
    window = body.get("within_window")
    within = "unknown" if not isinstance(window, bool) else "yes" if window else "NO"
    given = [s for s in body.get("statements") or [] if isinstance(s, Mapping) and s.get("text")]
    statements = [scrub(str(s["text"])) for s in given]
    return Attested(
        valid=valid,
        linked=linked,
        run_id=str(run.get("id", "")),
        attested_at=when(body.get("attested_at")),
        within_window=within,
        stores=[
            f"{s.get('store')}: {'covered' if s.get('covered') else 'NOT covered'}"
            for s in body.get("stores") or []
            if isinstance(s, Mapping)
        ],
        statements=statements,
        key_unwrappable_by=when(body.get("key_unwrappable_by")) if body.get("key_unwrappable_by") else "",
    )


def certificate(
    document: Mapping[str, Any],
    body: dict[str, Any],
    public_key_pem: str,
    physical: PhysicalView | None,
    attestation: tuple[Mapping[str, Any] | None, bool, bool] = (None, False, False),
) -> Certificate:
    """The certificate of a receipt whose signature verified (``body``: the verified body, ``document``: the
    signed document), with where its physical clean-up stands and ``attestation`` as (the attestation's body
    as this reader may see it, its signature valid, linked to this receipt)."""
    request_id = str(body.get("request_id"))
    file_name = f"receipt-{request_id}.json"
    phases = _phases(body)
    stores = _stores(body, phases)
    status = str(body.get("status"))
    checked = bool(phases) and all(p.passed for p in phases)
    heading = "Certificate of erasure" if status == "completed" and checked else f"Erasure receipt: {status}"
    due_met = body.get("due_met") is True
    window = _window(body.get("physical") or {})
    return Certificate(
        request_id=request_id,
        subject_key=str(body.get("subject_key")),
        app_name=str(body.get("app_name")),
        status=status,
        heading=heading,
        outcome=str(body.get("outcome", status)).replace("_", " "),
        received_at=when(body.get("received_at")),
        completed_at=when(body.get("completed_at")),
        due_at=when(body.get("due_at")),
        due="met: completed on or before the due date" if due_met else "MISSED: completed after the due date",
        due_met=due_met,
        stores=stores,
        held_anywhere=any(s.held for s in stores),
        holds=_holds(body),
        second_sweep=_second_sweep(body),
        phases=phases,
        physical=_physical(physical, window),
        physical_line=physical.line() if physical is not None else "",
        window=window,
        signature=_signature(document, body, public_key_pem, file_name),
        attestation=_attested(*attestation),
        file_name=file_name,
    )

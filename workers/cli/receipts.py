"""Signed receipts and physical attestations: ``receipt show|verify|public-key``, and ``verify`` (re-run the
verifier on a request, changing nothing)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from workers.cli.common import Adder, add_json, platform_for, print_json
from workers.cli.requests import forget_status
from workers.errors import ErasureCliError, ExitCode, NotFoundError
from workers.settings import Settings


def _public_key(settings: Settings) -> Any:
    from verifier.receipts.signing import signing_key
    from workers.local_secrets import load_secrets

    return signing_key(load_secrets(settings).signing_key).public_key()


def _receipt_show(args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.attestation import attestation_bytes, load_attestation, read_physical
    from verifier.receipts.issuing import load_receipt
    from verifier.receipts.signing import document_bytes

    with platform_for(settings) as platform:
        document = load_receipt(platform, args.request_id)
        body = document["receipt"] if document is not None else None
        if args.physical:  # the second document: the platform's physical attestation (issue 30)
            attestation = load_attestation(platform.pool, args.request_id)
            if attestation is None:
                now = read_physical(platform.pool, args.request_id, body).line()
                raise NotFoundError(f"no physical attestation for request {args.request_id} (yet): physical: {now}")
            sys.stdout.write(attestation_bytes(attestation).decode())
            return 0
        physical = read_physical(platform.pool, args.request_id, body) if body is not None else None
    if document is None or body is None or physical is None:
        raise NotFoundError(f"no receipt for request {args.request_id} (yet)")
    if args.json:
        sys.stdout.write(document_bytes(document).decode())
        return 0
    print(f"receipt {body['request_id']}  {body['status']}  subject {body['subject_key']}")
    print(f"  received {body['received_at']}  completed {body['completed_at']}  due met: {body.get('due_met', '-')}")
    for step in body.get("steps", []):
        counts = ", ".join(f"{k}={v}" for k, v in sorted(step["counts"].items()) if v)
        print(f"  {step['name']:<14} {step['state']:<8} {counts}")
    from workers.progress_view import render_verifications

    print("\n".join(render_verifications(body)))
    print(f"  derived rows to regenerate: {len(body['derived_rows_removed'])}")
    print(f"  physical: {physical.line()}")
    print(f"  signature: {document['signature']['alg']} key {document['signature']['key_id']}")
    return 0


def _receipt_verify(args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.signing import ATTESTATION_SCHEMA_ID, InvalidReceipt, load_public_key, verify_bytes

    key = load_public_key(_read(args.public_key)) if args.public_key else _public_key(settings)

    def verdict(code: int, valid: bool, said: str, **more: Any) -> int:
        if args.json:
            print_json({"file": args.file, "signature_valid": valid, "exit_code": int(code), "verdict": said, **more})
        else:
            print(said)
        return code

    try:
        body = verify_bytes(_read(args.file), key)
    except InvalidReceipt as exc:
        return verdict(ExitCode.VERIFICATION_FAILED, False, f"INVALID: {exc}")
    attestation = body.get("schema") == ATTESTATION_SCHEMA_ID
    if args.receipt:  # the attestation's link to its receipt: same request, the receipt's SHA-256
        if not attestation:
            raise ErasureCliError("--receipt goes with a physical attestation: give the attestation as FILE")
        from verifier.receipts.attestation import link_problem

        try:
            receipt = verify_bytes(_read(args.receipt), key)
        except InvalidReceipt as exc:
            return verdict(ExitCode.VERIFICATION_FAILED, True, f"INVALID: the receipt {args.receipt}: {exc}")
        problem = link_problem(body, receipt)
        if problem:
            return verdict(ExitCode.VERIFICATION_FAILED, True, f"NOT LINKED: {problem}")
    noun = "" if attestation else "receipt "  # an attestation's verdict names it
    done, what = receipt_verdict(body)
    facts = {"request_id": body.get("request_id"), "kind": "attestation" if attestation else "receipt"}
    if done or args.any_status:
        linked = f", linked to the receipt {args.receipt}" if args.receipt else ""
        return verdict(
            ExitCode.OK, True, f"valid: {noun}{body['request_id']} ({what}) signed by this key{linked}", **facts
        )
    return verdict(ExitCode.NOT_DONE, True, f"signature valid, but {noun}{body['request_id']} is {what}", **facts)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ErasureCliError(f"cannot read {path}: {exc.strerror}") from None


def receipt_verdict(body: dict[str, Any]) -> tuple[bool, str]:
    """Whether a verified receipt proves a completed deletion, and what it is in words. A suppression hides
    items from recall and deletes nothing: never reported as a completed erasure (it was, with exit 0). A
    physical attestation proves the physical clean-up when it names stores and every one is covered by a
    run that started after the request's last deletion."""
    from verifier.receipts.signing import ATTESTATION_SCHEMA_ID

    if body.get("schema") == ATTESTATION_SCHEMA_ID:
        return _attestation_verdict(body)
    status = str(body.get("status"))
    if body.get("strength") == "suppress":
        return False, f"a suppression ({status}): items hidden from recall, nothing deleted"
    if status != "completed":
        return False, f"{status}: the erasure was not completed"
    outcome = str(body.get("outcome", ""))
    if outcome.startswith("nothing_found"):
        return True, "completed: nothing found, the platform held no data for this id; nothing erased"
    return True, "completed"


def _attestation_verdict(body: dict[str, Any]) -> tuple[bool, str]:
    run = body.get("run")
    run_id = run.get("id") if isinstance(run, dict) else None
    stores = body.get("stores")
    stores = stores if isinstance(stores, list) else []
    missing = [str(s.get("store")) for s in stores if not (isinstance(s, dict) and s.get("covered") is True)]
    if not stores:  # fail closed: an attestation that names no store proves nothing
        return False, f"a physical attestation that names no store (run {run_id})"
    if missing:
        return False, f"a physical attestation with stores not covered: {', '.join(missing)} (run {run_id})"
    if body.get("run_after_last_deletion") is not True:
        return False, f"a physical attestation whose run {run_id} did not start after the last deletion"
    late = "" if body.get("within_window") is not False else f"; late: after its window (due {body.get('due_at')})"
    return True, f"physical attestation: every store covered, run {run_id}{late}"


def _receipt_public_key(_args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.signing import public_key_pem

    sys.stdout.write(public_key_pem(_public_key(settings)))
    return 0


def _reverify(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import reverify_input
    from workers.temporal_client import connect
    from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyResult

    if args.request_id.startswith("fr_"):  # a forget: its own store and workflow
        return forget_status(args.request_id, settings, args.json)

    async def main() -> int:
        with platform_for(settings) as platform:
            row = platform.requests.get(args.request_id)
        client = await connect(settings)
        import uuid

        result = await client.execute_workflow(
            VERIFIER_WORKFLOW,
            reverify_input(row),
            id=f"reverify-{row.request_id}-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=VerifyResult,
        )
        code = ExitCode.OK if result.passed else ExitCode.VERIFICATION_FAILED
        if args.json:
            print_json(
                {
                    "request_id": row.request_id,
                    "passed": result.passed,
                    "checks": [
                        {"check": c.check, "passed": c.passed, "counts": c.counts, "detail": c.detail}
                        for c in result.checks
                    ],
                }
            )
            return code
        for check in result.checks:
            print(f"  {'ok ' if check.passed else 'BAD'} {check.check:<14} {check.detail}")
        print("verification passed" if result.passed else "verification FAILED")
        return code

    return asyncio.run(main())


def _add_receipt(sub: Any) -> None:
    rc = sub.add_parser("receipt", help="show, verify or get the key of signed receipts")
    rc_sub = rc.add_subparsers(dest="receipt_command", required=True)
    show = rc_sub.add_parser("show", help="a request's receipt in words, or its signed document")
    show.add_argument("request_id", help="the erasure request id (er_...)")
    show.add_argument("--json", action="store_true", help="print the signed receipt document")
    show.add_argument(
        "--physical",
        action="store_true",
        help="print the signed physical attestation document instead (an error while physical is pending)",
    )
    show.set_defaults(handler=_receipt_show)
    ver = rc_sub.add_parser(
        "verify",
        help="exit 0 if the signature is valid and the erasure completed (a physical attestation: every store "
        "covered), 1 if validly signed but not completed, 4 if the signature or the link does not verify",
    )
    ver.add_argument("file", help="a receipt or a physical attestation (JSON)")
    ver.add_argument(
        "--receipt",
        metavar="FILE",
        help="with an attestation: check it is linked to this receipt (same request id, the receipt's SHA-256)",
    )
    ver.add_argument(
        "--any-status", action="store_true", help="exit 0 for any validly signed receipt, whatever its status"
    )
    ver.add_argument("--public-key", help="PEM file (default: this deployment's key)")
    add_json(ver)
    ver.set_defaults(handler=_receipt_verify)
    rc_sub.add_parser("public-key", help="print the receipt signing public key (PEM)").set_defaults(
        handler=_receipt_public_key
    )


def _add_verify(sub: Any) -> None:
    rv = sub.add_parser("verify", help="re-run the verifier on a request (changes nothing; exit 4 if it fails)")
    rv.add_argument("request_id", help="the erasure request id (er_...; a forget's fr_... shows its state)")
    add_json(rv)
    rv.set_defaults(handler=_reverify)


COMMANDS: dict[str, Adder] = {"receipt": _add_receipt, "verify": _add_verify}

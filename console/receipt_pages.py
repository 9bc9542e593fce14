"""A request's receipt on the console: its certificate page, the same certificate as a PDF, the signed
receipt and the signed physical attestation as files.

All four read with the receipt's permission (``receipts:read``: a requester their own requests' only,
``console.permissions``) and are audited once per request, as what they are: opening the certificate page
is ``receipt_viewed``; the JSON, the PDF and the attestation are ``receipt_downloaded`` with the ``format``
(issue 42: opening the page used to be logged as a download). The certificate (``console.certificate``)
says only what a receipt whose signature verifies says; a receipt that does not verify is shown as such,
with nothing of it as fact, and has no PDF.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from console.attestation_view import redacted, sees_evidence
from console.certificate import Certificate, certificate
from console.certificate_pdf import certificate_pdf
from console.context import console_of
from console.dependencies import PageReceipts
from console.erasure_requests import OpenedReceipt, open_receipt
from console.identity import Principal
from console.rendering import render
from verifier.receipts.signing import public_key_pem

router = APIRouter()


def _shown_attestation(opened: OpenedReceipt, p: Principal) -> dict[str, Any] | None:
    """The attestation's body as ``p`` may see it: the signed original for a reader of every request's
    receipts, the redacted claims (no store evidence, no internal address) for a requester."""
    a = opened.attestation
    if a is None or a.body is None:
        return None
    return a.body if sees_evidence(p) else redacted(a.body)


def _certificate(request: Request, opened: OpenedReceipt, p: Principal) -> Certificate | None:
    if not opened.valid or opened.body is None:
        return None
    a = opened.attestation
    return certificate(
        opened.document,
        opened.body,
        public_key_pem(console_of(request).receipt_public_key),
        opened.physical,
        (_shown_attestation(opened, p), bool(a and a.valid), opened.linked()),
    )


@router.get("/requests/{request_id}/receipt", include_in_schema=False)
async def receipt_page(request: Request, request_id: str, p: PageReceipts) -> HTMLResponse:
    """The certificate: the receipt in plain words, with links to the signed JSON and the PDF."""
    opened = await open_receipt(console_of(request), request_id, p, "receipt_viewed")
    attestation = opened.attestation
    shown = _shown_attestation(opened, p)
    return render(
        request,
        "receipt.html",
        p,
        request_id=request_id,
        valid=opened.valid,
        why=opened.why,
        cert=_certificate(request, opened, p),
        physical=opened.physical.line() if opened.physical else "",
        attestation=None
        if attestation is None
        else {
            "valid": attestation.valid,
            "why": attestation.why,
            "linked": opened.linked(),
            "redacted": not sees_evidence(p),
            "body": json.dumps(shown, indent=2, sort_keys=True) if shown else "",
        },
    )


@router.get("/requests/{request_id}/receipt.pdf", include_in_schema=False)
async def receipt_pdf(request: Request, request_id: str, p: PageReceipts) -> Response:
    """The certificate as a PDF; 409 for a receipt whose signature does not verify (nothing to certify)."""
    opened = await open_receipt(console_of(request), request_id, p, "receipt_downloaded", {"format": "pdf"})
    cert = _certificate(request, opened, p)
    if cert is None:
        raise HTTPException(409, f"the stored receipt's signature does not verify ({opened.why}): no certificate")
    pdf = await asyncio.to_thread(certificate_pdf, cert)
    headers = {"Content-Disposition": f'attachment; filename="receipt-{request_id}.pdf"'}
    return Response(pdf, media_type="application/pdf", headers=headers)


@router.get("/requests/{request_id}/receipt.json", include_in_schema=False)
async def receipt_download(request: Request, request_id: str, p: PageReceipts) -> JSONResponse:
    opened = await open_receipt(console_of(request), request_id, p, "receipt_downloaded", {"format": "json"})
    headers = {"Content-Disposition": f'attachment; filename="receipt-{request_id}.json"'}
    return JSONResponse(opened.document, headers=headers)


@router.get("/requests/{request_id}/physical.json", include_in_schema=False)
async def attestation_download(request: Request, request_id: str, p: PageReceipts) -> JSONResponse:
    """The signed physical attestation (issue 30), read with the receipt's permission; 404 while pending. A
    requester downloads the redacted view (``console.attestation_view``): the claims, the console's check of
    the signature, no store evidence or internal address, and no signature (a redacted copy cannot verify)."""
    opened = await open_receipt(
        console_of(request), request_id, p, "receipt_downloaded", {"format": "physical_attestation"}
    )
    if opened.attestation is None:
        raise HTTPException(404, "no physical attestation yet")
    if sees_evidence(p):
        headers = {"Content-Disposition": f'attachment; filename="receipt-{request_id}.physical.json"'}
        return JSONResponse(opened.attestation.document, headers=headers)
    view = {
        "redacted": redacted(opened.attestation.body),
        "signature_valid": opened.attestation.valid,
        "linked_to_receipt": opened.linked(),
    }
    headers = {"Content-Disposition": f'attachment; filename="receipt-{request_id}.physical.redacted.json"'}
    return JSONResponse(view, headers=headers)

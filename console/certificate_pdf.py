"""The receipt's certificate as a PDF, made with fpdf2 (a maintained, pure-Python PDF writer).

The same ``console.certificate.Certificate`` the page shows, so the two cannot differ. The PDF uses the
standard Helvetica and Courier fonts every PDF reader has (nothing embedded, nothing fetched); they cover
Latin-1 only, so the few typographic characters a receipt's texts may carry are written as their ASCII
look-alikes and anything else as ``?`` (``plain``): a receipt's text is ids, store names, counts and times.
The signed receipt stays the proof; the PDF says where to download it and how to check it.
"""

from __future__ import annotations

from fpdf import FPDF
from fpdf.enums import XPos, YPos

from console.certificate import Certificate

_ASCII = str.maketrans({"\u2014": "-", "\u2013": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                        "\u2264": "<=", "\u2265": ">=", "\u2212": "-", "\u2026": "..."})  # fmt: skip


def plain(text: str) -> str:
    """``text`` in the core fonts' Latin-1 (look-alikes for common typography, ``?`` for the rest)."""
    return text.translate(_ASCII).encode("latin-1", "replace").decode("latin-1")


class _Pdf(FPDF):
    def __init__(self, cert: Certificate) -> None:
        super().__init__(format="A4")
        self.cert = cert
        self.set_margins(18, 16, 18)
        self.set_auto_page_break(True, 16)
        self.set_title(plain(f"{cert.heading} {cert.request_id}"))
        self.set_subject("Signed erasure receipt, in plain words")
        self.set_creator("erasure-orchestrator console")
        self.set_lang("en")

    def footer(self) -> None:
        self.set_y(-12)
        self.set_font("helvetica", size=8)
        self.set_text_color(90)
        self.cell(0, 5, plain(f"{self.cert.heading}, request {self.cert.request_id}: page {self.page_no()}"), align="C")
        self.set_text_color(0)

    def heading(self, text: str) -> None:
        self.ln(3)
        self.set_font("helvetica", "B", 12)
        self.multi_cell(0, 6, plain(text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_font("helvetica", size=10)

    def line_of(self, text: str, indent: float = 0, font: str = "helvetica", size: float = 10) -> None:
        self.set_font(font, size=size)
        self.set_x(self.l_margin + indent)
        self.multi_cell(0, 5, plain(text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_font("helvetica", size=10)

    def pair(self, label: str, value: str) -> None:
        self.set_font("helvetica", "B", 10)
        self.cell(42, 5, plain(label))
        self.set_font("helvetica", size=10)
        self.multi_cell(0, 5, plain(value), new_x=XPos.LMARGIN, new_y=YPos.NEXT)


def certificate_pdf(cert: Certificate) -> bytes:
    """The certificate as PDF bytes."""
    pdf = _Pdf(cert)
    pdf.add_page()
    pdf.set_font("helvetica", "B", 16)
    pdf.multi_cell(0, 8, plain(cert.heading), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_font("helvetica", size=10)
    pdf.line_of(f"Outcome: {cert.outcome}.")
    pdf.ln(2)
    pdf.pair("Request", cert.request_id)
    pdf.pair("Subject key", f"{cert.subject_key} (a keyed pseudonym: the person's id appears nowhere here)")
    pdf.pair("App", cert.app_name)
    pdf.pair("Received", cert.received_at)
    pdf.pair("Completed", cert.completed_at)
    pdf.pair("Due", f"{cert.due_at}; {cert.due}")

    pdf.heading("What was erased, store by store")
    for s in cert.stores:
        pdf.set_font("helvetica", "B", 10)
        pdf.multi_cell(0, 5, plain(f"{s.title}: {s.what}"), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        pdf.line_of("Erased: " + (", ".join(s.erased) if s.erased else "nothing found to erase") + ".", 4)
        if s.held:
            pdf.line_of("Kept under a legal hold: " + ", ".join(s.held) + ".", 4)
        if s.notes:
            pdf.line_of("Also: " + ", ".join(s.notes) + ".", 4)
        for check in s.checks:
            pdf.line_of(check, 4)
        if s.remains:
            pdf.line_of(f"What remains: {s.remains}", 4, size=9)
    pdf.heading("Legal holds")
    pdf.line_of(
        "Kept for people under a legal hold: see the stores above."
        if cert.held_anywhere
        else "Nothing was kept for anyone under a legal hold."
    )
    for h in cert.holds or ["No legal hold on this person during the request."]:
        pdf.line_of(h)

    pdf.heading("How it was verified")
    pdf.line_of("Each store was read directly, past the erasure's fence, by an independent verifier.")
    for phase in cert.phases:
        pdf.line_of(f"{phase.title}: {'passed' if phase.passed else 'FAILED'}")
        for c in phase.checks:
            pdf.line_of(f"{c.label}: {c.said}", 4)
    pdf.line_of(cert.second_sweep)

    pdf.heading("Physical removal")
    pdf.line_of(cert.physical)
    if cert.attestation is not None:
        a = cert.attestation
        pdf.line_of(
            f"Signed attestation: signature {'valid' if a.valid else 'NOT valid'}, "
            f"{'linked to this receipt' if a.linked else 'NOT linked to this receipt'}; run {a.run_id}, "
            f"attested {a.attested_at}, within the window: {a.within_window}."
        )
        if a.stores:
            pdf.line_of("Stores: " + "; ".join(a.stores) + ".", 4)
        if a.key_unwrappable_by:
            pdf.line_of(f"No copy of the shredded data key can be unwrapped from {a.key_unwrappable_by}.", 4)
        for statement in a.statements:
            pdf.line_of(statement, 4, size=9)

    sig = cert.signature
    pdf.heading("Signature, and how to check it")
    pdf.pair("Algorithm", sig.algorithm)
    pdf.pair("Key id", sig.key_id)
    pdf.pair("Canonicalization", sig.canonicalization)
    pdf.pair("Receipt SHA-256", sig.receipt_sha256)
    pdf.line_of(
        f"This PDF is not the proof: the signed receipt is ({cert.file_name}, downloadable from the console). "
        "Save the public key below as public.pem and run:"
    )
    for command in sig.commands:
        pdf.line_of(command, 4, font="courier", size=9)
    pdf.line_of(sig.public_key_pem.strip(), 4, font="courier", size=8)
    return bytes(pdf.output())

"""The verifier workflow, its independent checks, and signed PII-free receipts."""

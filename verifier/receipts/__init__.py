"""Receipts: the signed document (``signing``: layout, signing and verifying, no I/O), its body and storing it
once per request (``issuing``), the physical attestation (``attestation``). The activities that issue them
(``activities.receipts``, item forgetting's, the physical job's) use these; nothing here imports an activity.
"""

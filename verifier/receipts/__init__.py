"""Receipts: the signed document (``signing``: layout, signing and verifying, no I/O) and issuing one once per
request (``issuing``, an activity). The verifier's workflow and item forgetting's activities both use them.
"""

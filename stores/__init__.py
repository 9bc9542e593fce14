"""Adapters that read and erase the platform's real stores, the tombstone ledger and migrations."""

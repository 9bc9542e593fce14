"""Ledgers the erasure and forgetting keep: the fence's tombstones and their journal, the deletion queue, the lifecycle
journal, owners' holds and item forgetting's tombstones.

Imports only ``stores.infra`` and ``stores.privacy``.
"""

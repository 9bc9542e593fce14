"""The Qdrant memory store: per-user points in one Qdrant collection, through ``qdrant-client``'s local mode.

``store.py`` is the store (its client, its configuration, fenced writes, its gated delete and state update);
``lifecycle.py`` its expiry, supersession and eviction passes; ``adapter.py`` its erase adapter (with its
verifier reads, its lifecycle capabilities, its ``check()`` and the seeders' hook). It was added as one folder
and one entry point (``qdrant_memory`` in ``pyproject.toml``): off unless ``ERASURE_QDRANT_PATH`` names its
directory.
"""

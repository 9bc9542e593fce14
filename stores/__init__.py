"""The agent platform's stores and the erasure's own records, in layers (each imports only the ones above it here).

- ``infra``: clients and plumbing;
- ``privacy``: identity, keys and sealing, vector rotation, redaction, embedders;
- ``ledgers``: tombstones, journals, the deletion queue, owners' holds;
- ``adapters``: the erase-adapter contract and the registry that orders the plan;
- one folder per store of the agent platform, its service and its adapter together: ``sessions``, ``artifacts``,
  ``memory``, ``chroma``, ``response_cache``, ``logs``, ``keys``, and ``physical`` clean-up;
- ``books`` (requests, approvals), ``forgetting`` (item forgetting), ``lifecycle`` (expiry, retirement);
- ``platform`` (the wiring of every store for one deployment) and ``operations`` over all of them.

``tests/unit/test_layers.py`` holds the rule.
"""

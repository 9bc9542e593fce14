"""Privacy primitives: subject identity, key service and envelope sealing, vector rotation, redaction, embedders.

Imports only ``stores.infra``.
"""

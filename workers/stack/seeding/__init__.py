"""Seeders for the local stack, the demo and the benchmark: outside the runtime code (nothing under ``stores``,
``activities``, ``workflows`` or ``verifier`` imports them).
"""

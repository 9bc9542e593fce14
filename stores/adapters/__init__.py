"""Erase adapters: one module per store behind one interface (``interface``), found through the registry.

Built in: ``artifacts``, ``sessions``, ``memory`` (after sessions), ``logs``, ``keys`` (after every other).
A platform registers more under the entry-point group ``erasure.adapters`` (see the README, "Adding a store").
"""

"""Temporal workflow definitions and the PII-free contracts they exchange."""

"""Runnable processes and their wiring: worker, CLI, settings, logging, local stack launcher."""

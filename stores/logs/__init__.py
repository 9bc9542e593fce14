"""The agent platform's sealed log archive: the archive, its sealing, the reads the adapter uses and its erase
adapter.
"""

"""The memory lifecycle's platform-side jobs: retention expiry, retiring idle sessions, replaying the lifecycle
journal.
"""

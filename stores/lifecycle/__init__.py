"""The memory lifecycle's platform-side jobs: retention expiry and retiring idle sessions (replaying the lifecycle
journal after a restore is an operation over every store: ``stores.operations.lifecycle_replay``).
"""

"""The memory lifecycle's platform-side jobs: retention expiry (retiring idle sessions and replaying the lifecycle
journal reach every store, so they are operations: ``stores.operations``).
"""

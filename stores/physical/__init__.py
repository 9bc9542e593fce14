"""Physical clean-up of the platform's stores (Postgres vacuum, SeaweedFS compaction) and the stores' own evidence of
it.
"""

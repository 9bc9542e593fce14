"""The agent platform's memory store (Postgres, pgvector-style embeddings): rows, the sealed service, capture,
lifecycle rules and states, upkeep and its erase adapter (``adapter``).
"""

"""The agent platform's memory store (Postgres, pgvector-style embeddings): the rows' store, search and eraser
(``store``, ``search``, ``eraser``, with the request's start captures), the sealed service, the write capture
checks, lifecycle rules and states, upkeep and its erase adapter (``adapter``).
"""

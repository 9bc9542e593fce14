"""The agent platform's sessions store (google-adk tables on Postgres): its sealed service, schema, sealing, re-sealing
and its erase adapter (``adapter``).
"""

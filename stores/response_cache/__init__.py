"""The agent platform's response cache (Valkey): the cache and its erase adapter."""

"""The agent platform's Chroma memory backend: the collection, the heap scrub it needs, and its erase adapter."""

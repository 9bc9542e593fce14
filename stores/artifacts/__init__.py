"""The agent platform's artifact store (S3, every version): the bucket's reads and deletions, the sealed service and
its erase adapter (``adapter``).
"""

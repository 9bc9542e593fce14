"""``python -m bench``: measure the erasure saga against the raw deletions, the platform size and the
orchestration ceiling, on a local stack the benchmark starts and stops itself. See bench/README.md."""

"""Operations over every store of the platform (through ``stores.platform.Platform``): the scheduled late-writer sweep,
restore replay, fingerprints, presence probes and the memory view.

The top layer of ``stores``.
"""

"""Operations over every store of the platform (through ``stores.platform.Platform``): the scheduled late-writer
sweep, restore replay, lifecycle journal replay, retiring idle sessions, the agent's forgetting tools,
fingerprints, presence probes, the memory view and preparing the database.

The top layer of ``stores``.
"""

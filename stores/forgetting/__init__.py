"""Item forgetting: forget requests, resolving what a request names and the forgetter itself (the agent's tools,
which reach every store, are an operation: ``stores.operations.forget_tools``).
"""

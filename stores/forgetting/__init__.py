"""Item forgetting: forget requests, resolving what a request names, the agent's tools and the forgetter itself."""

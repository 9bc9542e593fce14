"""The compliance team's front door: an authenticated HTTP API (and, later, the web console) over the
erasure service. It files requests, approves them (four eyes), places holds and reads receipts through
Temporal and the request store, and writes every action to the hash-chained audit log."""

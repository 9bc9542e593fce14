"""The erasure's books: requests and their records, filing details and approvals."""

"""The local stack launcher: Temporal dev server, embedded Postgres, SeaweedFS S3 and a KMS endpoint."""

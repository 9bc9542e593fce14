"""Infrastructure: AWS and SeaweedFS clients, S3 batching, the database pool's checks, migrations, traces, outbound
calls, errors.

The lowest layer of ``stores``: imports nothing else of the project.
"""

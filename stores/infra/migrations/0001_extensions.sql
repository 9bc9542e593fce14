-- pgvector for memory embeddings (pgserver ships it).
CREATE EXTENSION IF NOT EXISTS vector;

"""One module per saga step: thin, idempotent activity wrappers over ``stores``."""

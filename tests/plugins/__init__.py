"""Throwaway stores a test registers through the ``erasure.adapters`` entry point, as a platform would."""

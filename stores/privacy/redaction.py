"""Raw identifiers being handled right now, so the log processor can mask them wherever they appear.

Activities register the raw user id they looked up for the duration of the step (``with sensitive(id)``);
``workers.logging_setup.refuse_raw_identifiers`` masks every registered value in every log line.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_values: dict[str, int] = {}


@contextmanager
def sensitive(*values: str) -> Iterator[None]:
    items = [v for v in values if v]
    with _lock:
        for v in items:
            _values[v] = _values.get(v, 0) + 1
    try:
        yield
    finally:
        with _lock:
            for v in items:
                _values[v] -= 1
                if not _values[v]:
                    del _values[v]


def current() -> list[str]:
    """Registered values, longest first (so a longer id is masked before its prefix)."""
    with _lock:
        return sorted(_values, key=len, reverse=True)


def mask(text: str, replacement: str = "[redacted]") -> str:
    """``text`` with every registered value replaced (longest first)."""
    for needle in current():
        text = text.replace(needle, replacement)
    return text

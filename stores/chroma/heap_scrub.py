"""Freed heap memory overwritten in this process, so a file written from uninitialised memory holds no one's data.

Chroma's HNSW index (hnswlib, inside chromadb's Rust bindings) allocates its level-0 buffer with ``malloc``
for the index's capacity and persists the whole buffer (``data_level0.bin``: capacity x slot size, 100 slots
for a new collection), so the slots no element uses are written to disk as whatever the allocator handed
back. In a worker that process holds freed memory of the indexes it opened before: a collection rebuilt
after a sweep or an item forget was seen holding, in its unused slots, the vector the rebuild had just
dropped, and any subject's database can receive bytes of another subject's index the same way
(``tests/integration/test_chroma_memory.py`` plants exactly this).

glibc's ``M_PERTURB`` closes it: every byte ``free`` releases is overwritten, and every byte ``malloc`` hands
out is initialised, for the whole process. It costs a ``memset`` per allocation and release, and it is set
once, when the first Chroma store is built. Where the C library is not glibc (``mallopt`` absent), nothing is
set and the caller is told so; the vectors are still under the user's rotation, unreadable once the key is
shredded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

M_PERTURB = -6  # glibc's mallopt parameter number (malloc.h)
PATTERN = 0xA5  # freed bytes become 0xA5, fresh allocations 0x5A

_lock = threading.Lock()
_done: bool | None = None


def scrub_freed_heap() -> bool:
    """Turn on glibc's perturbation for this process (idempotent); whether it is on."""
    global _done
    with _lock:
        if _done is None:
            _done = _set_perturb()
        return _done


def _set_perturb() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_PERTURB, PATTERN) == 1)

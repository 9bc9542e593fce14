"""The erase-adapter contract: the interface every store's adapter provides (``interface``), the registry that finds
them through entry points and orders the plan (``registry``), and small shared pieces (``common``, ``tombstone_reads``).

The adapters themselves live with their stores (``stores/<store>/adapter.py``). A platform registers more under the
entry-point group ``erasure.adapters`` (see docs/adding-a-store.md).
"""

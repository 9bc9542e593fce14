"""When the object store's deletions have reached its volumes: a marker sent through the filer's own queue.

A SeaweedFS filer deletes an object's chunks from the volume servers through a queue: an S3 delete removes
the entry at once and queues its chunk ids; every 1.123 s the filer takes everything queued and deletes it,
batch after batch, each batch finished (on every volume server) before the next starts. The physical
clean-up must not take its "before" picture of the volumes until the erased user's chunks have left them,
and the filer offers no completion signal. So this module makes one:

1. write a marker file through the filer (random bytes, outside ``/buckets``: no S3 client sees it) and read
   its chunk id from the filer's metadata;
2. delete it through the filer (its chunk id queued behind every deletion queued before);
3. poll each volume server holding the chunk until it answers 404: the batch that held the marker is done,
   and so is every batch before it, which hold the deletions made before step 1.

With several volume servers, one batch's servers are deleted from side by side, so the marker's may finish
a moment before another's: a short grace (``GRACE_SECONDS``) covers that, only then. A marker the filer kept
inline (no chunk: ``saveToFilerLimit`` set) proves nothing: the caller falls back to its fixed wait.
Deletions the filer failed and put on its retry queue are not covered (nor were they by a fixed wait).

The wait is shared by every caller in the process (``SharedProbe``): a caller is served by any marker written
after it asked, so twenty concurrent erasures poll with one marker, not twenty.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from stores.infra.seaweedfs import STATUS_TIMEOUT, SeaweedMaster

#: where the markers live in the filer's namespace (outside ``/buckets``: not an S3 object of any bucket)
MARKER_DIRECTORY = "/.erasure-settle"
MARKER_BYTES = 64
POLL_SECONDS = 0.1
#: several volume servers: the marker's batch is deleted on each side by side; the others' finish with it
GRACE_SECONDS = 0.25


class MarkerInline(Exception):
    """The filer kept the marker's bytes in its own metadata: no chunk went through the deletion queue."""


@dataclass(frozen=True)
class Drained:
    """One marker's round trip: seconds from its write to its chunk's 404, and the volume servers polled."""

    seconds: float
    servers: int


class FilerDeletionQueue:
    """The marker probe against one filer; the chunk's volume servers found through the master."""

    def __init__(self, filer_url: str, master: SeaweedMaster) -> None:
        self.filer = filer_url.rstrip("/")
        self.master = master
        self._http = httpx.Client(timeout=STATUS_TIMEOUT)

    def drain(self, deadline: float, waiting: Callable[[float], None]) -> Drained:
        """Send a marker through the queue and wait until its chunk is gone (``waiting(seconds)`` between
        polls). Raises ``TimeoutError`` past ``deadline`` (monotonic), ``MarkerInline`` when there is no
        chunk to watch, ``LookupError`` when the chunk or its volume server cannot be named, ``httpx.HTTPError``
        when the filer, master or a volume server fails."""
        started = time.monotonic()
        path = f"{MARKER_DIRECTORY}/{uuid.uuid4().hex}"
        self._http.post(f"{self.filer}{path}", files={"file": ("marker", os.urandom(MARKER_BYTES))}).raise_for_status()
        try:
            chunk = self._chunk_of(path)
        finally:
            self._http.delete(f"{self.filer}{path}").raise_for_status()
        servers = self.master.locations(chunk)
        if not servers:  # nothing to poll proves nothing: fail (the step is retried), never report drained
            raise LookupError("the master names no volume server for the marker's chunk")
        left = servers
        while left := [server for server in left if self.master.holds_chunk(server, chunk)]:
            if time.monotonic() >= deadline:
                raise TimeoutError("the object store's deletion queue did not reach the marker in time")
            waiting(time.monotonic() - started)
            time.sleep(POLL_SECONDS)
        if len(servers) > 1 or len(self.master.nodes()) > 1:
            time.sleep(GRACE_SECONDS)
        return Drained(time.monotonic() - started, len(servers))

    def _chunk_of(self, path: str) -> str:
        reply = self._http.get(f"{self.filer}{path}", params={"metadata": "true"})
        reply.raise_for_status()
        chunks = reply.json().get("chunks") or []
        if not chunks:
            raise MarkerInline("the filer kept the marker inline")
        chunk = chunks[0].get("file_id") or chunks[0].get("fileId")
        if not chunk:
            raise LookupError("the filer's metadata names no file id for the marker's chunk")
        return str(chunk)


class SharedProbe:
    """One probe at a time for the whole process; a caller is served by the first that *started* after it
    asked (so it was sent after the caller's own deletions). A failed probe serves nobody: a waiting caller
    runs the next one itself and sees its failure."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = False
        self._served_from = float("-inf")  # start time of the latest probe that succeeded
        self.runs = 0  # probes run (tests and figures)

    def wait(self, probe: Callable[[], object], waiting: Callable[[], None], check_every: float = 0.5) -> bool:
        """Return once a probe that started after this call has succeeded (``probe`` when this caller runs
        one; ``waiting()`` while another caller's runs); True when this caller ran it."""
        asked = time.monotonic()
        with self._cond:
            while self._served_from < asked and self._running:
                self._cond.wait(check_every)
                waiting()
            if self._served_from >= asked:
                return False
            self._running = True
        started = time.monotonic()
        ok = False
        try:
            probe()
            ok = True
        finally:
            with self._cond:
                self._running = False
                self.runs += 1
                if ok:
                    self._served_from = max(self._served_from, started)
                self._cond.notify_all()
        return True

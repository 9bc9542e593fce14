"""SeaweedFS's master, as the physical clean-up uses it: read its volumes, ask it to compact them.

A deleted S3 object leaves its bytes in a SeaweedFS volume file (``<collection>_<id>.dat``) as garbage
until the volume is compacted (SeaweedFS calls it vacuum): the live needles are copied to a new file and
the old one is removed. The master's ``/vol/vacuum?garbageThreshold=`` compacts every writable volume
whose garbage ratio reaches the threshold, synchronously. It returns at once, having done nothing, when a
vacuum is already running (the master's own periodic one), and it skips read-only volumes and volumes
short of replicas. So a call proves nothing by itself: :func:`not_compacted` compares each volume's
compaction revision before and after.

The volumes are read from the volume servers themselves (``/status``, live counters), found through the
master's topology (``/dir/status``); the master's own view lags by a heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

#: compact every volume holding any garbage at all: one deleted artifact in a full volume is a ratio of 1e-7
GARBAGE_THRESHOLD = 1e-12
#: a compaction copies a volume's live bytes (up to its size limit): allowed well over a volume's copy time
COMPACTION_TIMEOUT = httpx.Timeout(10.0, read=20 * 60.0)
STATUS_TIMEOUT = httpx.Timeout(10.0)


@dataclass(frozen=True)
class Volume:
    """One replica of a volume on one volume server, as its ``/status`` reports it."""

    node: str
    id: int
    collection: str
    deleted_bytes: int
    deleted_needles: int
    compact_revision: int
    read_only: bool

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.id)

    @property
    def holds_garbage(self) -> bool:
        return self.deleted_bytes > 0 or self.deleted_needles > 0


@dataclass(frozen=True)
class Outcome:
    """What one compaction did: writable volumes with garbage compacted, and those it left (read-only ones
    are SeaweedFS's to skip; a writable one left means the request had no effect and is asked again)."""

    compacted: tuple[tuple[str, int], ...]
    left: tuple[tuple[str, int], ...]
    read_only: tuple[tuple[str, int], ...]


def not_compacted(before: Mapping[tuple[str, int], Volume], after: Mapping[tuple[str, int], Volume]) -> Outcome:
    """Which volumes that held garbage ``before`` were compacted by ``after`` (their revision moved on).

    A volume that held no garbage needs nothing; one gone since (moved, deleted) holds nothing here any
    more; a read-only one is reported apart (SeaweedFS never compacts it on a sweep)."""
    compacted: list[tuple[str, int]] = []
    left: list[tuple[str, int]] = []
    read_only: list[tuple[str, int]] = []
    for key, was in sorted(before.items()):
        now = after.get(key)
        if not was.holds_garbage or now is None:
            continue
        if now.compact_revision != was.compact_revision:
            compacted.append(key)
        elif was.read_only or now.read_only:
            read_only.append(key)
        else:
            left.append(key)
    return Outcome(tuple(compacted), tuple(left), tuple(read_only))


def volumes_of(node: str, status: Mapping[str, Any]) -> dict[tuple[str, int], Volume]:
    """The volumes in one volume server's ``/status`` reply (erasure-coded shards are not listed there)."""
    out: dict[tuple[str, int], Volume] = {}
    for v in status.get("Volumes") or []:
        volume = Volume(
            node=node,
            id=int(v["Id"]),
            collection=str(v.get("Collection", "")),
            deleted_bytes=int(v.get("DeletedByteCount", 0)),
            deleted_needles=int(v.get("DeleteCount", 0)),
            compact_revision=int(v.get("CompactRevision", 0)),
            read_only=bool(v.get("ReadOnly", False)),
        )
        out[volume.key] = volume
    return out


class SeaweedMaster:
    """The master's HTTP API (and each volume server's status page, reached with the master's scheme)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._scheme = urlsplit(self.url).scheme or "http"
        # one client for every call (thread-safe): a call of its own builds an SSL context each time, about
        # 0.15 CPU s per erasure measured under 20 concurrent erasures, and opens a connection each time
        self._http = httpx.Client(timeout=STATUS_TIMEOUT)

    def nodes(self) -> list[str]:
        """``host:port`` of every volume server the master knows."""
        reply = self._http.get(f"{self.url}/dir/status")
        reply.raise_for_status()
        topology = reply.json().get("Topology") or {}
        return sorted(
            str(node["Url"])
            for dc in topology.get("DataCenters") or []
            for rack in dc.get("Racks") or []
            for node in rack.get("DataNodes") or []
        )

    def volumes(self) -> dict[tuple[str, int], Volume]:
        out: dict[tuple[str, int], Volume] = {}
        for node in self.nodes():
            reply = self._http.get(f"{self._scheme}://{node}/status")
            reply.raise_for_status()
            out.update(volumes_of(node, reply.json()))
        return out

    def locations(self, chunk: str) -> list[str]:
        """``host:port`` of every volume server holding the volume of ``chunk`` (a file id ``<volume>,<key>``)."""
        reply = self._http.get(f"{self.url}/dir/lookup", params={"volumeId": chunk.split(",")[0]})
        reply.raise_for_status()
        return sorted({str(loc["url"]) for loc in reply.json().get("locations") or []})

    def holds_chunk(self, server: str, chunk: str) -> bool:
        """Whether a volume server still serves ``chunk`` (404 once its needle is deleted)."""
        reply = self._http.head(f"{self._scheme}://{server}/{chunk}")
        if reply.status_code == 404:
            return False
        reply.raise_for_status()
        return True

    def vacuum(self, threshold: float = GARBAGE_THRESHOLD) -> None:
        """Ask the master to compact every volume whose garbage ratio reaches ``threshold`` (blocks until done,
        or returns at once when a vacuum is already running)."""
        reply = self._http.post(
            f"{self.url}/vol/vacuum", params={"garbageThreshold": repr(threshold)}, timeout=COMPACTION_TIMEOUT
        )
        reply.raise_for_status()

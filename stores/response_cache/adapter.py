"""Adapter for the LLM response cache (``stores.response_cache.cache``): the user's entries, found by their index.

Erase takes up to 500 digests from the subject's index at a time, records them in the request
(``erased_refs``), then unlinks their entries and their index members in one transaction
(``ResponseCache.erase_entries``): the index is never unlinked by itself, so no entry it named can outlive it
(a crash leaves the rest findable; the index is the cursor; the heartbeat carries the count so far). Then
the entries no index lists are found by the subject's key space (``SCAN`` ``MATCH`` on the subject's exact
entry pattern, ``ResponseCache.unindexed``), recorded and unlinked (``unindexed_entries``). ``capture``
names the index's digests at the request's start (``begin_request`` records them); remaining reads on its
own: the index's size, for every digest captured at the start or recorded by the erase whether its entry
exists, and the entries under the subject's key that no index lists (after completion: those sealed under
no live data key, so a returning user's own never fail it). Sweeps remove the entries the index dates
before the erasure and the unlisted ones sealed under no live key (the saga's own sweep: every unlisted one).

``forget_items`` (item forgetting and session erasure): the subject's entries, through the index, whose
prompt or response (or both together) the forget's tombstone covers (a forgotten span, an erased session's
whole text) are unlinked with their index members; cost follows the subject's entries.

Every delete goes through the cache's one gated delete (``ResponseCache.remove``): a batch goes while the
subject's hold lock is held shared in a transaction that read the subject's hold, and a hold (``OwnerHeld``)
stops the erase, the sweep or the forget before the batch (the step ends ``held``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stores.adapters.interface import Beat, Bound, DataClaims, Disposition, ForgetScope, Remaining, Subject, Swept
from stores.infra.errors import DataKeyShredded
from stores.privacy.identity import key_part, subject_key
from stores.response_cache.cache import entry_key, index_key, shared_cache

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

BATCH = 500


class CacheReads:
    """The verifier's reads: ``ZCOUNT`` of the index and ``EXISTS`` of each recorded entry, by their keys."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def indexed(self, app_name: str, subject: str, before: datetime | None) -> int:
        top = "+inf" if before is None else f"({before.timestamp()}"
        return int(self._client.zcount(f"rc:i:{key_part(app_name)}:{subject}", "-inf", top))

    def entries_back(self, app_name: str, subject: str, digests: list[str]) -> int:
        found = 0
        for start in range(0, len(digests), BATCH):
            keys = [f"rc:e:{key_part(app_name)}:{subject}:{d}" for d in digests[start : start + BATCH]]
            found += int(self._client.exists(*keys)) if keys else 0
        return found


class ResponseCacheAdapter:
    name = "response_cache"
    after: tuple[str, ...] = ()
    batched = True
    disposition = Disposition(
        "deleted",
        "snapshots and replicas of the cache keep entries until rewritten: prompts and responses sealed, key destroyed",
    )

    def __init__(self, context: StoreContext) -> None:
        self.cache = shared_cache(context)  # AdapterNotConfigured when the platform has none
        self.keys, self.requests, self.secret = context.keys, context.requests, context.subject_secret
        self.reads = CacheReads(self.cache.client)

    def locate(self, subject: Subject) -> dict[str, int]:
        return {"cached_responses": int(self.cache.client.zcard(index_key(subject.app_name, subject.subject_key)))}

    def _erase_from_index(self, subject: Subject, before: datetime | None, beat: Beat | None, removed: int = 0) -> int:
        """Batches of the index's digests (those scored before ``before``): each recorded in the request
        first (so a crash never loses what the check must look at), then its entries and index members
        removed together (``ResponseCache.erase_entries``)."""

        def record(digests: list[str]) -> None:
            if subject.request_id:
                self._record(subject, digests)

        def done(gone: int) -> None:
            if beat:
                beat({"removed": removed + gone})

        cutoff = before.timestamp() if before is not None else None
        gone = self.cache.erase_entries(
            subject.app_name, subject.subject_key, before=cutoff, on_batch=record, batch=BATCH, after_batch=done
        )
        return removed + gone

    def capture(self, subject: Subject) -> list[str]:
        """The index's digests at the request's start (keyed digests of prompts: no text)."""
        members = self.cache.client.zrange(index_key(subject.app_name, subject.subject_key), 0, -1)
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        if subject.request_id:
            self._record(subject, [])  # recorded as run, even with nothing to erase: the check's input
        removed = self._erase_from_index(subject, None, beat, int(cursor.get("removed", 0)))
        return {"cached_responses": removed, "unindexed_entries": self._erase_unindexed(subject, stale_only=False)}

    def _erase_unindexed(self, subject: Subject, *, stale_only: bool) -> int:
        """The subject's entries no index lists, found by the subject's key space (recorded first, like the
        index's): ``stale_only`` keeps a returning user's entries (a sweep after the erasure)."""

        def record(digests: list[str]) -> None:
            if subject.request_id:
                self._record(subject, digests)

        return self.cache.erase_unindexed(subject.app_name, subject.subject_key, stale_only=stale_only, on_batch=record)

    def _record(self, subject: Subject, digests: list[str]) -> None:
        def add(r: RequestRecord) -> RequestRecord:
            refs = dict(r.erased_refs or {})
            refs[self.name] = sorted(set(refs.get(self.name, [])) | set(digests))
            return replace(r, erased_refs=refs)

        self.requests.update_record(subject.request_id, add)

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        recorded = (record.erased_refs or {}).get(self.name)
        if recorded is None:
            return Remaining(missing=("the response cache step's list of erased entries",))
        before = bound.erased_at if bound else None
        at_start = (record.refs_at_start or {}).get(self.name) or []
        counts = {
            "indexed_entries": self.reads.indexed(subject.app_name, subject.subject_key, before),
            "erased_entries_back": 0
            if bound
            else self.reads.entries_back(subject.app_name, subject.subject_key, recorded),
            # read by key, whatever became of the index: an entry held at the start and still there
            "entries_from_start_left": 0
            if bound
            else self.reads.entries_back(subject.app_name, subject.subject_key, sorted(set(at_start) - set(recorded))),
            # found by the subject's key space, whatever the index says (after completion: those sealed under
            # no live data key, copies from before the erasure; a returning user's own are not leftovers)
            "unindexed_entries": sum(
                len(batch)
                for batch in self.cache.unindexed(subject.app_name, subject.subject_key, stale_only=bound is not None)
            ),
        }
        return Remaining(counts)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept(
            {
                "cached_responses": self._erase_from_index(subject, before, None),
                "unindexed_entries": self._erase_unindexed(subject, stale_only=before is not None),
            }
        )

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        client, app, sk = self.cache.client, scope.app_name, scope.subject_key
        index = index_key(app, sk)
        digests = [d.decode() if isinstance(d, bytes) else str(d) for d in client.zrange(index, 0, -1)]
        removed = 0
        for start in range(0, len(digests), BATCH):
            batch = digests[start : start + BATCH]
            keys = [entry_key(app, sk, d) for d in batch]
            covered = []
            for key, digest, sealed in zip(keys, batch, client.mget(keys), strict=True):
                if sealed is None:
                    continue
                try:
                    data = json.loads(self.keys.decrypt(bytes(sealed), key.encode()))
                except DataKeyShredded:  # unreadable for good: nothing of it can be quoted again
                    continue
                prompt, response = str(data["prompt"]), str(data["response"])
                if any(scope.covers(None, t) for t in (prompt, response, f"{prompt} {response}")):
                    covered.append((key, digest))
            if covered:
                removed += self.cache.remove(app, sk, [k for k, _d in covered], [d for _k, d in covered])
                beat({"cache_forgetting": removed})
        return {"cached_responses": removed}

    def items_left(self, scope: ForgetScope) -> int:
        """The subject's entries the forget's tombstone still covers (each read through the index)."""
        client, app, sk = self.cache.client, scope.app_name, scope.subject_key
        left = 0
        for member in client.zrange(index_key(app, sk), 0, -1):
            key = entry_key(app, sk, member.decode() if isinstance(member, bytes) else str(member))
            sealed = client.get(key)
            if sealed is None:
                continue
            try:
                data = json.loads(self.keys.decrypt(bytes(sealed), key.encode()))
            except DataKeyShredded:
                continue
            texts = (str(data["prompt"]), str(data["response"]))
            left += any(scope.covers(None, t) for t in (*texts, " ".join(texts)))
        return left

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        client = self.cache.client
        sk = subject_key(self.secret, app_name, user_id)
        index = client.zrange(index_key(app_name, sk), 0, -1, withscores=True)
        digest = hashlib.sha256()
        for member, score in index:
            value = client.get(entry_key(app_name, sk, member.decode())) or b""
            digest.update(member + repr(score).encode() + hashlib.sha256(value).digest())
        return {"response_cache": digest.hexdigest(), "counts": {"cached_responses": len(index)}}

    def claims(self) -> DataClaims:
        """The data map: the entries' and the indexes' key spaces (``entry_key``, ``index_key``)."""
        return DataClaims(keyspaces=("rc:e:", "rc:i:"))

"""The agent platform's LLM response cache on a Redis-protocol server (Valkey locally, any Redis in production).

Agent platforms cache model responses for cost and latency; a cached response quotes the user's prompt
and whatever the model said about them, so the cache is personal data of that user. Entries are keyed per
user and indexed per user, so an erasure finds them through the index and never walks the keyspace:

``rc:e:<app>:<subject key>:<digest>``  the entry: prompt and response sealed under the user's data key
                                      (crypto-shredding makes every snapshot or replica copy unreadable)
``rc:i:<app>:<subject key>``           the subject's index: a sorted set of entry digests, scored by the
                                      time each was written (the sweeps remove what predates an erasure)

``digest`` is a keyed hash of the normalised prompt (no prompt in any key). Both keys carry the cache's TTL;
every write refreshes the index's, so the index outlives its entries. A write while the user is fenced
(an erasure running) is dropped and counted, like the fenced memory service's.

The index is never dropped while it names an entry: ``erase_entries`` takes its members a batch at a time,
hands them to the caller (who records them) and unlinks the entries and their members together in one
transaction; a sorted set with no member left is gone by itself, so the index disappears exactly when the
last entry it named does, and a crash at any point leaves every remaining entry named by it for the retry.
An entry orphaned anyway (its index member dropped by other code, evicted by a server under memory pressure,
or a replica's copy restored after the erasure) is found by the subject's key space: the entry's key carries
the subject key, so ``SCAN`` with ``MATCH`` on the subject's exact entry pattern (``entry_pattern``: the app
escaped, the subject key validated, then exactly ``DIGEST_LENGTH`` hex digits, so never another subject's)
finds it without the index (``unindexed``, ``erase_unindexed``). The erase, the sweeps and the check all
look there too, after the index (issue 39). That walks the keyspace (no bounded lookup by key prefix exists
on a Redis-protocol server; a cluster hash tag would bound it to one slot): the one place where the cost
follows the cache's size, paid once per erasure, per sweep and per check.

Every delete of a subject's entries is gated on the subject, their owner (``stores.ledgers.owner_holds.gated``):
each batch's ``UNLINK`` runs while the owner's hold lock is held shared in a transaction that read the owner's
hold, so a hold placed while an erase runs stops it before its next batch (``OwnerHeld``: that batch changed
nothing) and one being placed waits for the batch under way. The cache's own expiry is the server's TTL on
each key: no code of ours runs there, so no gate can, and a held owner's entries still expire at their TTL
(keeping them would take the hold itself removing their TTL when it is placed: not done).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import valkey

from stores.infra.errors import CiphertextInvalid
from stores.ledgers.owner_holds import OwnerHeld, gated
from stores.privacy.crypto import key_id_of
from stores.privacy.identity import derived_key, key_part, subject_key, validate_subject_key

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from stores.adapters.context import StoreContext
    from stores.ledgers.tombstones import TombstoneLedger
    from stores.privacy.keys import DataKeyStore

DEFAULT_TTL = 7 * 24 * 3600


def index_key(app_name: str, subject: str) -> str:
    return f"rc:i:{key_part(app_name)}:{subject}"


def entry_key(app_name: str, subject: str, digest: str) -> str:
    return f"rc:e:{key_part(app_name)}:{subject}:{digest}"


def entry_pattern(app_name: str, subject: str) -> str:
    """``MATCH`` pattern of the subject's entries (``key_part`` escapes every glob character of the app;
    a subject key is ``sk_`` and hex), never of another subject's: the digest is fixed-length hex."""
    return f"rc:e:{key_part(app_name)}:{validate_subject_key(subject)}:" + "[0-9a-f]" * DIGEST_LENGTH


DIGEST_LENGTH = 32
ERASE_BATCH = 500


@dataclass(frozen=True)
class CachedResponse:
    prompt: str
    response: str


class ResponseCache:
    def __init__(
        self, client: Any, keys: DataKeyStore, ledger: TombstoneLedger, secret: bytes, pool: ConnectionPool
    ) -> None:
        self.client = client
        self.pool = pool  # the hold store: every delete of a subject's entries reads the subject's hold
        self._keys = keys
        self._ledger = ledger
        self._secret = secret
        self._digest_key = derived_key(secret, "cache-key")
        self.dropped_while_fenced = 0

    @classmethod
    def connect(
        cls, url: str, keys: DataKeyStore, ledger: TombstoneLedger, secret: bytes, pool: ConnectionPool
    ) -> ResponseCache:
        return cls(valkey.Valkey.from_url(url, socket_timeout=5.0), keys, ledger, secret, pool)

    def close(self) -> None:
        self.client.close()

    def digest(self, app_name: str, subject: str, prompt: str) -> str:
        normalised = " ".join(prompt.split()).lower()
        msg = f"{app_name}\x00{subject}\x00{normalised}".encode()
        return hmac.new(self._digest_key, msg, hashlib.sha256).hexdigest()[:DIGEST_LENGTH]

    def put(
        self,
        app_name: str,
        user_id: str,
        prompt: str,
        response: str,
        *,
        ttl: int = DEFAULT_TTL,
        at: float | None = None,
    ) -> bool:
        """Cache one response for the user; ``False`` (and counted) while the user is fenced."""
        sk = subject_key(self._secret, app_name, user_id)
        if self._ledger.user_fenced(sk):
            self.dropped_while_fenced += 1
            return False
        return self.put_unfenced(app_name, sk, prompt, response, ttl=ttl)

    def put_unfenced(
        self, app_name: str, sk: str, prompt: str, response: str, *, ttl: int = DEFAULT_TTL, at: float | None = None
    ) -> bool:
        """A write that bypasses the fence (a late writer, a replayed queue): what the sweeps are for."""
        digest = self.digest(app_name, sk, prompt)
        key = entry_key(app_name, sk, digest)
        plain = json.dumps({"prompt": prompt, "response": response}).encode()
        _key_id, sealed = self._keys.encrypt(sk, plain, key.encode())
        pipe = self.client.pipeline(transaction=True)
        pipe.set(key, sealed, ex=ttl)
        pipe.zadd(index_key(app_name, sk), {digest: time.time() if at is None else at})
        # the index lives as long as its longest-lived entry: a later, shorter TTL never shortens it (an entry
        # outliving its index could be found by neither the eraser nor the verifier)
        pipe.expire(index_key(app_name, sk), ttl, nx=True)
        pipe.expire(index_key(app_name, sk), ttl, gt=True)
        pipe.execute()
        return True

    def get(self, app_name: str, user_id: str, prompt: str) -> CachedResponse | None:
        """The cached response, or ``None`` (always ``None`` while the user is fenced)."""
        sk = subject_key(self._secret, app_name, user_id)
        if self._ledger.user_fenced(sk):
            return None
        key = entry_key(app_name, sk, self.digest(app_name, sk, prompt))
        sealed = self.client.get(key)
        if sealed is None:
            return None
        data = json.loads(self._keys.decrypt(bytes(sealed), key.encode()))
        return CachedResponse(str(data["prompt"]), str(data["response"]))

    def forget_quoting(self, app_name: str, subject: str, quotes: Callable[[str], bool]) -> int:
        """Remove the subject's entries whose prompt or response quotes a forgotten item (``quotes`` says,
        from the forget tombstone's hashed spans), through the subject's index: cost follows their entries.
        A subject under a legal hold keeps them (0): the supersession that asks is the memory write's
        aftermath, which a hold placed since must not fail."""
        index = index_key(app_name, subject)
        digests = [d.decode() if isinstance(d, bytes) else str(d) for d in self.client.zrange(index, 0, -1)]
        removed = 0
        for start in range(0, len(digests), 200):
            batch = digests[start : start + 200]
            keys = [entry_key(app_name, subject, d) for d in batch]
            quoting = []
            for key, digest, sealed in zip(keys, batch, self.client.mget(keys), strict=True):
                if sealed is None:
                    continue
                data = json.loads(self._keys.decrypt(bytes(sealed), key.encode()))
                if quotes(f"{data['prompt']} {data['response']}"):
                    quoting.append((key, digest))
            try:
                removed += self.remove(app_name, subject, [k for k, _d in quoting], [d for _k, d in quoting])
            except OwnerHeld:
                return removed
        return removed

    def remove(self, app_name: str, subject: str, keys: Sequence[str], members: Sequence[str]) -> int:
        """The cache's one gated delete: ``keys`` (the subject's entries) unlinked and ``members`` taken off the
        subject's index in one transaction, under the subject's hold gate (``OwnerHeld`` before anything goes
        when the subject is held). Returns the keys asked to go."""
        if not keys and not members:
            return 0
        with gated(self.pool, [validate_subject_key(subject)]):
            pipe = self.client.pipeline(transaction=True)
            if keys:
                pipe.unlink(*keys)
            if members:
                pipe.zrem(index_key(app_name, subject), *members)
            pipe.execute()
        return len(keys)

    def erase_entries(
        self,
        app_name: str,
        subject: str,
        *,
        before: float | None = None,
        on_batch: Callable[[list[str]], None] | None = None,
        batch: int = ERASE_BATCH,
        after_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Remove the subject's entries through its index (those scored before ``before``, when given), a
        batch at a time: ``on_batch`` gets each batch's digests before anything of it is deleted (record them
        there), then the entries and their index members go in one transaction. The index is never unlinked
        by itself: it is gone when its last member is, so no entry it named can outlive it. Returns entries
        asked to go (those already gone included: a retry after a crash counts them again)."""
        index = index_key(app_name, subject)
        top = "+inf" if before is None else f"({before}"
        removed = 0
        while True:
            members = self.client.zrangebyscore(index, "-inf", top, start=0, num=batch)
            digests = [m.decode() if isinstance(m, bytes) else str(m) for m in members]
            if not digests:
                return removed
            if on_batch:
                on_batch(digests)
            removed += self.remove(app_name, subject, [entry_key(app_name, subject, d) for d in digests], digests)
            if after_batch:  # the batch is gone: a heartbeat here resumes after it
                after_batch(removed)

    def orphaned_entries(self, app_name: str, subject: str) -> int:
        """The subject's entries its index does not name (or all of them, with no index): found by their keys
        (``SCAN`` ``MATCH`` on the subject's entry pattern, a walk of the keyspace), never by the raw id."""
        return sum(len(batch) for batch in self.unindexed(app_name, subject))

    def unindexed(self, app_name: str, subject: str, *, stale_only: bool = False) -> Iterator[list[str]]:
        """Batches of the digests of the subject's entries its index does not name, found by their keys.

        ``stale_only``: only those not sealed under a live data key (a shredded one: a copy from before an
        erasure; or no envelope at all), so a returning user's entries are never taken for leftovers. A
        database or server error is raised, never read as "nothing there"."""
        index = index_key(app_name, subject)
        prefix_length = len(entry_key(app_name, subject, ""))
        for keys in self._scan_batches(entry_pattern(app_name, subject)):
            digests = [(k.decode() if isinstance(k, bytes) else str(k))[prefix_length:] for k in keys]
            scores = self.client.zmscore(index, digests)
            found = [d for d, score in zip(digests, scores, strict=True) if score is None]
            if found and stale_only:
                values = self.client.mget([entry_key(app_name, subject, d) for d in found])
                sealed = {d: _key_id(bytes(v)) for d, v in zip(found, values, strict=True) if v is not None}
                live = self._keys.live_ids({k for k in sealed.values() if k is not None})
                found = [d for d, key_id in sealed.items() if key_id not in live]
            if found:
                yield found

    def erase_unindexed(
        self,
        app_name: str,
        subject: str,
        *,
        stale_only: bool = False,
        on_batch: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Remove the subject's entries its index does not name (``unindexed``), a batch at a time:
        ``on_batch`` gets each batch's digests before anything of it is deleted. Returns how many went."""
        removed = 0
        for digests in self.unindexed(app_name, subject, stale_only=stale_only):
            if on_batch:
                on_batch(digests)
            removed += self.remove(app_name, subject, [entry_key(app_name, subject, d) for d in digests], [])
        return removed

    def _scan_batches(self, pattern: str, count: int = 1000) -> Iterator[list[Any]]:
        cursor: int = 0
        while True:
            cursor, keys = self.client.scan(cursor=cursor, match=pattern, count=count)
            if keys:
                yield list(keys)
            if int(cursor) == 0:
                return


def _key_id(sealed: bytes) -> uuid.UUID | None:
    """The data key an entry is sealed under (``None``: not an envelope, so under no live key)."""
    try:
        return key_id_of(sealed)
    except CiphertextInvalid:
        return None


def shared_cache(context: StoreContext) -> ResponseCache:
    """The context's response cache (one connection per process; ``AdapterNotConfigured`` without
    ``cache_url``)."""
    url = context.required("cache_url", "response cache")
    return context.shared(
        "response_cache",
        lambda: ResponseCache.connect(url, context.keys, context.ledger, context.subject_secret, context.pool),
        ResponseCache.close,
    )

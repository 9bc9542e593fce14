"""Run the platform's physical clean-up job (issue 30) for chosen requests, from tests.

The erasure saga no longer vacuums or compacts: a finished request is filed as owed a physical pass
(``stores.books.physical_pending``) and the scheduled job (``workflows/physical.py``) covers it. A test that
wants the physical removal of what one erasure deleted runs the job's own activities here, for exactly
those requests, in the workflow's order: ``physical_begin`` (the run's bound; every request named must be
open before it), ``physical_cover`` per physical store (``activities.physical_job.physical_stores``), after
erasures ``physical_keys`` (``rewrite``: the keys table rewritten and the WAL switched, as the workflow's
default does; ``off`` skips it), then ``physical_attest`` (each request judged from the stores' own
evidence, an attestation signed for each one covered). ``adapters`` puts another registry in the
platform's place (a planted physical adapter) for the whole run; ``before_attest`` runs after the stores'
passes and before the judgement (a deletion that comes after the run read its evidence).

The result says what was attested (the verified attestation bodies) and, per request and store, the
``Coverage`` the same adapters give after the run (why one was left pending).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.physical_job import PhysicalJobActivities, physical_stores
from stores.adapters.interface import Coverage, PhysicalCleanup
from stores.adapters.registry import AdapterRegistry
from stores.platform import Platform
from verifier.receipts.attestation import load_attestation
from verifier.receipts.signing import load_public_key, public_key_pem, signing_key, verify
from workflows.contracts.physical import (
    PhysicalAttestInput,
    PhysicalBeginInput,
    PhysicalCoverInput,
    PhysicalJobInput,
    PhysicalKeysInput,
)

#: how many open requests a test run's begin takes at most (every open one of the session: the run's bound)
LIMIT = 100_000


@dataclass(frozen=True)
class PhysicalRun:
    run_id: str
    started_at: str
    stores: list[str]  # the physical stores the run covered, in plan order
    counts: dict[str, int]  # ``<store>.<count>``, as the workflow sums them
    attested: int
    not_covered: int
    #: what ``physical_keys`` did (vacuum_full / switch_wal / checkpoint), empty when it did not run
    keys_table: dict[str, str] = field(default_factory=dict)
    #: per request: its signed attestation's body (signature verified), ``None`` when none was signed
    attestations: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: per request and store: the store's own judgement, read after the run with the run's adapters
    coverage: dict[str, dict[str, Coverage]] = field(default_factory=dict)

    def attestation(self, request_id: str) -> dict[str, Any]:
        body = self.attestations.get(request_id)
        assert body is not None, f"no physical attestation for {request_id}: {self.not_covered_in(request_id)}"
        return body

    def not_covered_in(self, request_id: str) -> dict[str, str]:
        """The stores whose evidence does not show the request covered: store -> the store's note."""
        return {store: c.note for store, c in self.coverage.get(request_id, {}).items() if not c.covered}


def run_physical(
    platform: Platform,
    signing_seed: bytes,
    request_ids: Sequence[str],
    *,
    adapters: AdapterRegistry | None = None,
    before_attest: Callable[[], None] | None = None,
    rewrite: str = PhysicalJobInput().rewrite,
) -> PhysicalRun:
    """One run of the physical job's activities over ``request_ids`` (a run id of its own)."""
    view = platform
    if adapters is not None:  # the platform as it is, with this registry: nothing of the shared one changes
        view = copy.copy(platform)
        view.adapters = adapters
    job, env = PhysicalJobActivities(view, signing_seed), ActivityEnvironment()
    run_id = f"physical-test-{uuid.uuid4().hex[:12]}"
    ids = list(request_ids)
    begun = env.run(job.physical_begin, PhysicalBeginInput(run_id, LIMIT))
    missing = [r for r in ids if r not in begun.request_ids]
    assert not missing, f"not owed a physical pass when the run began (never filed, or attested already): {missing}"
    assert begun.stores == physical_stores(view.adapters)
    counts: dict[str, int] = {}
    for store in begun.stores:
        covered = env.run(job.physical_cover, PhysicalCoverInput(run_id, store, ids))
        for key, value in covered.counts.items():
            counts[f"{store}.{key}"] = counts.get(f"{store}.{key}", 0) + value
    keys_table: dict[str, str] = {}
    if begun.erasures and rewrite != "off":
        keys_table = env.run(job.physical_keys, PhysicalKeysInput(rewrite)).done
    if before_attest is not None:
        before_attest()
    attested = env.run(
        job.physical_attest,
        PhysicalAttestInput(run_id, begun.started_at, ids, begun.stores, counts=counts, keys_table=keys_table),
    )
    public = load_public_key(public_key_pem(signing_key(signing_seed).public_key()))
    signed: dict[str, dict[str, Any] | None] = {}
    for request_id in ids:  # signed by this run: an earlier run's attestation is not this one's
        document = load_attestation(platform.pool, request_id)
        mine = document is not None and document["receipt"]["run"]["id"] == run_id
        signed[request_id] = verify(document, public) if document is not None and mine else None
    judged = {r: {name: _store(view, name).coverage(r) for name in begun.stores} for r in ids}
    return PhysicalRun(
        run_id,
        begun.started_at,
        list(begun.stores),
        counts,
        attested.attested,
        attested.not_covered,
        keys_table,
        signed,
        judged,
    )


def _store(platform: Platform, name: str) -> PhysicalCleanup:
    adapter = platform.adapters.get(name)
    assert isinstance(adapter, PhysicalCleanup), name
    return adapter

"""Test support: one store's adapter wrapped, to act when its step runs (place a hold, fail, plant)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from stores.adapters.interface import Beat, Bound, EraseAdapter, Remaining, Subject, Swept
from stores.adapters.registry import AdapterRegistry
from stores.books.approvals import Kind
from stores.books.request_record import RequestRecord
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.service import new_request_id
from workers.wiring import build_registry
from workers.worker import activity_objects, build_worker
from workflows.contracts.erasure import ErasureResult

P = TypeVar("P", bound=Platform)


class Wrapped:
    """``inner`` as it is, with ``after_erase(subject)`` called once its ``erase`` returned (``before_erase``
    before it starts) and ``after_sweep`` likewise around the second sweep's ``sweep_before``."""

    def __init__(
        self,
        inner: EraseAdapter,
        *,
        before_erase: Callable[[Subject], None] | None = None,
        after_erase: Callable[[Subject], None] | None = None,
        after_sweep: Callable[[Subject], None] | None = None,
    ) -> None:
        self.inner = inner
        self.name, self.after, self.batched = inner.name, inner.after, inner.batched
        self.after_sweep = bool(getattr(inner, "after_sweep", False))  # a physical clean-up step stays one
        self.before_erase, self.after_erase, self.on_sweep = before_erase, after_erase, after_sweep

    def locate(self, subject: Subject) -> dict[str, int]:
        return self.inner.locate(subject)

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        if self.before_erase:
            self.before_erase(subject)
        counts = self.inner.erase(subject, cursor, beat)
        if self.after_erase:
            self.after_erase(subject)
        return counts

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        return self.inner.remaining(subject, record, bound, beat)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        swept = self.inner.sweep_before(subject, before, keys_shredded_at)
        if self.on_sweep:
            self.on_sweep(subject)
        return swept

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        return self.inner.fingerprint(app_name, user_id)


def wired(platform: P, *adapters: EraseAdapter) -> P:
    """A platform built by hand (``Platform(config)``, a planted subclass) wired as ``build_platform`` wires
    one: its registry built from its own ``store_context`` (so a planted key service or request book reaches
    the adapters), with ``adapters`` (built from that context) standing in for the ones of the same names."""

    def build() -> AdapterRegistry:
        registry = build_registry(platform)
        for adapter in adapters:
            registry = registry.replacing(adapter)
        return registry

    platform.wire_adapters(build)
    return platform


def registry_with(platform: Platform, *adapters: EraseAdapter) -> AdapterRegistry:
    """The platform's registry with these adapters standing in for the ones of the same names."""
    registry = platform.adapters
    for adapter in adapters:
        registry = registry.replacing(adapter)
    return registry


async def erase_with(saga: SagaHarness, registry: AdapterRegistry, app: str, user: str) -> tuple[str, ErasureResult]:
    """One erasure through the real saga on a fresh task queue whose worker uses ``registry``:
    (request id, result)."""
    settings = saga.settings.model_copy(update={"task_queue": f"wrapped-{uuid.uuid4().hex[:8]}"})
    objects = activity_objects(saga.platform, load_secrets(settings).signing_key, registry)
    harness = SagaHarness(saga.client, saga.platform, settings)
    async with build_worker(saga.client, settings.task_queue, saga.platform, b"", activities=objects):
        filed = await harness.file(app, user)
        return filed.request_id, await harness.result(filed.request_id)


def open_request(platform: Platform, app: str, user: str) -> Subject:
    """A request row for (app, user), as filing stores it (no saga started): for calling adapters directly."""
    sk = subject_key(platform.config.subject_secret, app, user)
    now = datetime.now(UTC)
    request_id, _created = platform.requests.create(
        request_id=new_request_id(),
        subject_key=sk,
        app_name=app,
        user_id=user,
        received_at=now,
        due_at=now + timedelta(days=30),
        requested_by=None,
        reason=None,
    )
    return Subject(request_id, sk, app, user)


def record_approval(platform: Platform, request_id: str, sk: str, kind: Kind = "erasure") -> None:
    """An operator's single-person approval, as the CLI records it: the worker's approval gate lets the
    request's own workflow run (tests that start a workflow directly to exercise what comes after)."""
    platform.approvals.record(
        request_id=request_id,
        subject_key=sk,
        kind=kind,
        path="single_person",
        decision="approved",
        requested_by="act_test",
        decided_by="act_test",
    )

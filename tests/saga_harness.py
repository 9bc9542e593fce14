"""Run erasures end to end from tests: file through the real service code, wait with a timeout."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from stores.adapters.registry import AdapterRegistry
from stores.platform import Platform
from tests.physical_job import PhysicalRun, run_physical
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import load_public_key, public_key_pem, signing_key, verify
from workers.local_secrets import load_secrets
from workers.service import Filed, file_request
from workers.settings import Settings
from workers.stack.seeding.seeder import SeedReport, seed_platform
from workflows.contracts.erasure import ErasureResult, workflow_id


@dataclass
class SagaHarness:
    client: Client
    platform: Platform
    settings: Settings

    async def seed(self, app: str, users: list[str], size: str = "small", seed: int = 1) -> SeedReport:
        return await seed_platform(self.platform, app, users, size, seed)

    async def file(self, app: str, user: str, delay: int = 0, **kwargs: Any) -> Filed:
        return await file_request(
            self.client,
            self.platform,
            self.settings,
            app_name=app,
            user_id=user,
            ingestion_delay_seconds=delay,
            **kwargs,
        )

    async def result(self, request_id: str, wait_seconds: float = 120) -> ErasureResult:
        handle = self.client.get_workflow_handle(workflow_id(request_id), result_type=ErasureResult)
        try:
            return await asyncio.wait_for(handle.result(), wait_seconds)
        except TimeoutError:
            await self.dump(request_id)
            raise

    async def dump(self, request_id: str) -> None:
        """Print what a stuck erasure is waiting for (pending activities, children, last failures)."""
        for wid in (workflow_id(request_id), f"verify-{request_id}-main", f"verify-{request_id}-final"):
            try:
                desc = await self.client.get_workflow_handle(wid).describe()
            except Exception as exc:
                print(wid, "not found", type(exc).__name__)
                continue
            raw = desc.raw_description
            print(wid, desc.status, "pending activities:", len(raw.pending_activities))
            for pa in raw.pending_activities:
                print("  ", pa.activity_type.name, pa.state, "attempt", pa.attempt, pa.last_failure.message[:200])
            for child in raw.pending_children:
                print("  child", child.workflow_id)
            if raw.HasField("pending_workflow_task"):
                print("  pending workflow task", raw.pending_workflow_task)

    async def erase(self, app: str, user: str, delay: int = 0, wait_seconds: float = 120) -> ErasureResult:
        filed = await self.file(app, user, delay)
        return await self.result(filed.request_id, wait_seconds)

    async def physical(
        self,
        request_ids: Sequence[str],
        adapters: AdapterRegistry | None = None,
        before_attest: Callable[[], None] | None = None,
    ) -> PhysicalRun:
        """The platform's physical clean-up job (vacuum, compaction: no longer steps of the saga) run for
        exactly these finished requests, signing with the receipts' key (``tests.physical_job``); in a thread,
        so the in-process workers go on meanwhile."""
        seed = load_secrets(self.settings).signing_key
        return await asyncio.to_thread(
            run_physical, self.platform, seed, request_ids, adapters=adapters, before_attest=before_attest
        )

    def receipt_body(self, request_id: str) -> dict[str, Any]:
        document = load_receipt(self.platform, request_id)
        assert document is not None, "no receipt stored"
        pem = public_key_pem(signing_key(load_secrets(self.settings).signing_key).public_key())
        return verify(document, load_public_key(pem))


async def cli(h: SagaHarness, address: str, *args: str) -> tuple[int, str, str]:
    """Run ``erasure ...`` in a subprocess against the given Temporal frontend address."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "workers.cli",
        *args,
        env={**os.environ, **h.settings.env(), "ERASURE_TEMPORAL_ADDRESS": address},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()

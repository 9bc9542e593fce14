"""Traces (issue 31 item 6): one erasure filed through the console is one trace, from the HTTP request through
the workflow, its activities and their Postgres, S3 and KMS calls, and no span holds anything personal.

The spans go to an in-memory exporter installed for this test only (``workers.tracing.installed``): the
worker and the console here use a client with the tracing interceptor (``workers.tracing.interceptors``),
exactly as ``erasure worker`` and ``erasure serve`` get it from ``connect``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from console.app import create_app
from console.wiring import build_console
from stores.artifacts.bucket import user_prefix
from stores.privacy.identity import subject_key
from tests.console_harness import APP
from tests.oidc_issuer import AUDIENCE, LocalIssuer
from tests.saga_harness import SagaHarness
from workers import tracing
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker
from workflows.contracts.erasure import workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REQUESTER = "rita.trace@compliance.example"
APPROVER = "amir.trace@compliance.example"


def span_texts(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every name, attribute, event and status text of the spans: where personal data could hide."""
    out: list[str] = []
    for s in spans:
        out.append(s.name)
        out += [f"{k}={v}" for k, v in (s.attributes or {}).items()]
        out.append(str(s.status.description or ""))
        for event in s.events:
            out.append(event.name)
            out += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
        for link in s.links:
            out += [f"{k}={v}" for k, v in (link.attributes or {}).items()]
        out += [f"{k}={v}" for k, v in s.resource.attributes.items()]
    return out


def object_keys(saga: SagaHarness, bucket: str, prefix: str) -> list[str]:
    pages = saga.platform.s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
    return [v["Key"] for page in pages for v in page.get("Versions", [])]


async def test_one_erasure_is_one_trace_and_its_spans_hold_nothing_personal(
    saga: SagaHarness, issuer: LocalIssuer
) -> None:
    users = user_ids(2, 731, prefix="traced")
    target = users[0]
    report = await saga.seed(APP, users, "small", 731)
    canaries = report.users[0].signature_words
    assert canaries
    sk = subject_key(saga.platform.config.subject_secret, APP, target)
    keys = object_keys(saga, saga.platform.config.artifact_bucket, user_prefix(APP, sk))
    assert keys  # the target's artifacts: their keys must not reach a span

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    settings = saga.settings.model_copy(
        update={"task_queue": queue, "oidc_issuer": issuer.url, "oidc_audience": AUDIENCE}
    )
    secrets = load_secrets(settings)
    with tracing.installed(provider):
        interceptors = tracing.interceptors()
        assert interceptors, "a process with a tracer provider traces its Temporal calls"
        client = Client(**{**saga.client.config(), "interceptors": interceptors})
        app = create_app(build_console(settings, secrets, saga.platform, client))
        traced = SagaHarness(client, saga.platform, settings)
        async with (
            build_worker(client, queue, saga.platform, secrets.signing_key),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as http,
        ):

            def bearer(sub: str, role: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {issuer.mint(sub, [role])}"}

            filed = await http.post(
                "/api/requests", json={"app_name": APP, "user_id": target}, headers=bearer(REQUESTER, "requester")
            )
            assert filed.status_code == 201, filed.text
            request_id = filed.json()["request_id"]
            for _ in range(100):
                if saga.platform.requests.get(request_id).state == "pending_approval":
                    break
                await asyncio.sleep(0.1)
            approved = await http.post(f"/api/requests/{request_id}/approve", headers=bearer(APPROVER, "approver"))
            assert approved.status_code == 200, approved.text
            assert (await traced.result(request_id)).status == "completed"
    spans = list(exporter.get_finished_spans())

    # the filing's HTTP span is the root of the erasure's trace
    roots = [s for s in spans if s.name == "POST /api/requests"]
    assert len(roots) == 1, [s.name for s in spans]
    root = roots[0]
    assert root.parent is None
    trace_id = root.context.trace_id
    wid = workflow_id(request_id)
    ours = {wid, f"verify-{request_id}-main", f"verify-{request_id}-final"}

    def of_erasure(s: ReadableSpan) -> bool:
        return (s.attributes or {}).get("temporalWorkflowID") in ours

    erasure = [s for s in spans if of_erasure(s)]
    names = {s.name for s in erasure}
    assert "RunWorkflow:ErasureWorkflow" in names
    assert "RunWorkflow:VerifierWorkflow" in names
    assert len([n for n in names if n.startswith("RunActivity:")]) > 5, sorted(names)
    # the approval is a request of its own: its own trace, holding the update and nothing of the saga
    approvals = [s for s in spans if s.name == "POST /api/requests/{request_id}/approve"]
    assert len(approvals) == 1
    approval_trace = approvals[0].context.trace_id
    assert approval_trace != trace_id
    in_approval = {s.name for s in erasure if s.context.trace_id == approval_trace}
    assert in_approval, "the update is traced"
    assert all("Update" in name for name in in_approval), in_approval
    strays = sorted({s.name for s in erasure if s.context.trace_id not in (trace_id, approval_trace)})
    assert not strays, strays  # the workflow, its child workflows and every activity: the filing's trace
    in_trace = [s for s in spans if s.context.trace_id == trace_id]
    kinds = {s.name.split(" ")[0] for s in in_trace}
    assert {"file", "postgres", "S3", "KMS"} <= kinds, sorted({s.name for s in in_trace})
    # the activities' store calls are children of their activity's span, inside the same trace
    activity_ids = {s.context.span_id for s in in_trace if s.name.startswith("RunActivity:")}
    assert any(s.parent is not None and s.parent.span_id in activity_ids for s in in_trace if s.name.startswith("S3 "))

    # nothing personal anywhere: not the user id, not their words, not their object keys, not the staff's names
    texts = "\n".join(span_texts(spans))
    for secret in [target, *canaries, *keys, sk, REQUESTER, APPROVER]:
        assert secret not in texts, f"{secret!r} found in a span"
    details: dict[str, Any] = {s.name: dict(s.attributes or {}) for s in in_trace if s.name.startswith("S3 ")}
    assert all(
        set(a)
        <= {
            "rpc.system",
            "rpc.service",
            "rpc.method",
            "aws.s3.bucket",
            "http.response.status_code",
            "aws.retry_attempts",
            "error.type",
        }
        for a in details.values()
    )

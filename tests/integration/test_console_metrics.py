"""The console's Prometheus metrics (issue 31 item 6): served on a port of their own, never on the console's
(internet-facing) port; requests counted by route template, open requests by state, decisions, refusals."""

from __future__ import annotations

import httpx
import pytest

from console.telemetry import serve_metrics
from tests.console_harness import APP, Api
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_metrics_count_requests_by_route_decisions_and_refusals_on_their_own_port(api: Api) -> None:
    metrics = api.app.state.console.metrics
    server = serve_metrics(metrics, "127.0.0.1", 0)
    try:
        target = user_ids(1, 741, prefix="metrics")[0]
        await api.saga.seed(APP, [target])
        request_id = await api.file(target, sub="rita.metrics@compliance.example")
        await api.wait_for_state(request_id, "pending_approval")
        refused = await api.http.get("/api/audit", headers=api.bearer("rita.metrics@compliance.example", "requester"))
        assert refused.status_code == 403
        missing = await api.http.get("/api/requests/er_nosuchrequest0000000", headers=api.bearer("amir@x", "approver"))
        assert missing.status_code == 404
        denied = await api.http.post(
            f"/api/requests/{request_id}/deny",
            json={"reason": "identity not verified"},
            headers=api.bearer("amir.metrics@compliance.example", "approver"),
        )
        assert denied.status_code == 200, denied.text

        # the console's own port answers no /metrics: the Ingress exposes that port
        assert (await api.http.get("/metrics")).status_code == 404

        async with httpx.AsyncClient() as scraper:
            reply = await scraper.get(f"http://127.0.0.1:{server.server_port}/metrics")
        assert reply.status_code == 200
        text = reply.text
    finally:
        server.shutdown()
        server.server_close()
    assert 'erasure_console_http_requests_total{method="POST",route="/api/requests",status="201"} 1.0' in text
    # by route template: the raw path (a request id) is no label
    assert 'route="/api/requests/{request_id}",status="404"} 1.0' in text
    assert "er_nosuchrequest" not in text
    assert request_id not in text
    assert 'erasure_console_http_requests_total{method="GET",route="unmatched",status="404"} 1.0' in text
    assert 'erasure_console_http_request_seconds_count{method="POST",route="/api/requests/{request_id}/deny"} 1.0' in (
        text
    )
    assert 'erasure_console_requests_filed_total{source="api"} 1.0' in text
    assert 'erasure_console_decisions_total{decision="denied",outcome="taken"} 1.0' in text
    assert 'erasure_console_access_refused_total{permission="audit:read"} 1.0' in text
    assert 'erasure_console_requests_open{state="pending_approval"}' in text
    assert target not in text

"""The real local stack answers: a workflow on the dev server, Postgres, SeaweedFS (versioned), KMS."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import psycopg
import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from stores.aws_clients import kms_client, s3_client
from workers.settings import Settings
from workers.stack.launcher import resolve_kms_key_id
from workers.stack.parts import aws_endpoints

pytestmark = pytest.mark.integration


@activity.defn
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn(sandboxed=False)
class ShoutWorkflow:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))


@pytest.mark.asyncio(loop_scope="session")
async def test_workflow_runs_on_dev_server(temporal_env: WorkflowEnvironment) -> None:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(temporal_env.client, task_queue=queue, workflows=[ShoutWorkflow], activities=[shout]):
        result = await asyncio.wait_for(
            temporal_env.client.execute_workflow(ShoutWorkflow.run, "ping", id=f"wf-{uuid.uuid4()}", task_queue=queue),
            30,
        )
    assert result == "PING"


def test_postgres_round_trip_and_pgvector(local_stack: Settings) -> None:
    with psycopg.connect(local_stack.postgres_url) as conn:
        conn.execute("CREATE TEMP TABLE probe (id int, v vector(3))")
        conn.execute("INSERT INTO probe VALUES (%s, %s::vector)", (7, "[1,2,3]"))
        row = conn.execute("SELECT id, v::text FROM probe").fetchone()
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert row == (7, "[1,2,3]")
    assert versions
    assert versions[0] == 1


def test_s3_round_trip_on_versioned_bucket(local_stack: Settings) -> None:
    s3 = s3_client(aws_endpoints(local_stack))
    bucket = local_stack.artifact_bucket
    assert s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled"
    key = f"probe/{uuid.uuid4()}"
    s3.put_object(Bucket=bucket, Key=key, Body=b"one")
    s3.put_object(Bucket=bucket, Key=key, Body=b"two")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"two"
    s3.delete_object(Bucket=bucket, Key=key)
    listing = s3.list_object_versions(Bucket=bucket, Prefix=key)
    assert len(listing.get("Versions", [])) == 2
    assert len(listing.get("DeleteMarkers", [])) == 1
    everything = [
        {"Key": v["Key"], "VersionId": v["VersionId"]}
        for v in [*listing.get("Versions", []), *listing.get("DeleteMarkers", [])]
    ]
    s3.delete_objects(Bucket=bucket, Delete={"Objects": everything, "Quiet": True})  # type: ignore[typeddict-item]
    after = s3.list_object_versions(Bucket=bucket, Prefix=key)
    assert not after.get("Versions")
    assert not after.get("DeleteMarkers")


def test_kms_data_key_generate_and_decrypt(local_stack: Settings) -> None:
    kms = kms_client(aws_endpoints(local_stack))
    key_id = resolve_kms_key_id(local_stack)
    generated = kms.generate_data_key(KeyId=key_id, KeySpec="AES_256")
    plain = kms.decrypt(CiphertextBlob=generated["CiphertextBlob"], KeyId=key_id)["Plaintext"]
    assert plain == generated["Plaintext"]
    assert len(plain) == 32


def test_migrations_are_safe_to_rerun(local_stack: Settings) -> None:
    from stores.migrate import applied_versions, apply_migrations

    before = applied_versions(local_stack.postgres_url)
    assert apply_migrations(local_stack.postgres_url) == []
    assert applied_versions(local_stack.postgres_url) == before

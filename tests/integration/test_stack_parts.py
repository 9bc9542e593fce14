"""The real local stack answers: a workflow on the dev server, Postgres, SeaweedFS (versioned), KMS."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import psutil
import psycopg
import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from stores.infra.aws_clients import kms_client, s3_client
from tests.stack_fixture import make_test_settings
from workers.settings import Settings
from workers.stack.launcher import resolve_kms_key_id
from workers.stack.parts import PostgresPart, aws_endpoints, root_postgres_base
from workers.stack.process import ManagedProcess

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
    from stores.infra.migrate import applied_versions, apply_migrations

    before = applied_versions(local_stack.postgres_url)
    assert apply_migrations(local_stack.postgres_url) == []
    assert applied_versions(local_stack.postgres_url) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs Postgres as another user")
def test_as_root_private_parents_stay_private_and_the_run_dir_is_not_world_writable(tmp_path: Path) -> None:
    """Issue 12, item 15: as root, 'stack up' chmod'ed every parent of the data dir g+rx,o+rx and the run
    directory 0777 (pid files, which decide what 'stack down' kills, could be forged by anyone)."""
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    settings = make_test_settings(private / "checkout" / ".state")
    part = PostgresPart(settings)
    try:
        part.up()
        with psycopg.connect(settings.postgres_url, connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        assert not part.run_dir.stat().st_mode & 0o002
        assert not part.process().pid_file.stat().st_mode & 0o022
    finally:
        part.down()
        shutil.rmtree(root_postgres_base(settings), ignore_errors=True)


def test_a_pid_file_others_can_write_is_not_trusted(tmp_path: Path) -> None:
    """A forged pid file must never make 'stack down' kill an unrelated process."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        proc = ManagedProcess("victim", [sys.executable], tmp_path, [])
        proc.pid_file.write_text(
            json.dumps({"pid": victim.pid, "create_time": psutil.Process(victim.pid).create_time(), "argv": []})
        )
        proc.pid_file.chmod(0o666)
        assert proc.recorded() is None
        assert not proc.stop()
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_a_process_is_still_ours_after_the_clock_stepped_and_never_someone_elses(tmp_path: Path) -> None:
    """'stack down' stopped nothing when the recorded start time drifted (seen: a test stack's S3 and KMS
    outlived it); the recorded command line then decides, so a reused pid is still never ours."""
    ours = ManagedProcess("ours", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, [])
    ours.start()
    info = json.loads(ours.pid_file.read_text())
    ours.pid_file.write_text(json.dumps({**info, "create_time": info["create_time"] - 120}))  # a stepped clock
    pid = info["pid"]
    assert ours.recorded() is not None
    assert ours.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        other = ManagedProcess("other", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, [])
        other.pid_file.write_text(
            json.dumps({"pid": victim.pid, "create_time": 0.0, "argv": list(other.argv)})  # same pid, other argv
        )
        assert other.recorded() is None
        assert not other.stop()
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()

"""Per-user KMS key mode end to end: each user's data key is wrapped under a KMS key of its own; a full
erasure through the saga schedules that key's deletion (PendingDeletion), deletes every wrapped key, and a
ciphertext sealed before the erasure no longer opens, while another user's key stays usable."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from stores.infra.errors import DataKeyShredded
from stores.platform import Platform
from stores.privacy.crypto import key_id_of
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workers.worker import build_worker

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def wrapped_keys(platform: Platform, subject: str) -> list[tuple[bytes, str]]:
    """(wrapped data key, KMS key that wraps it) of every key version: what a backup of the table holds."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT wrapped_key, kms_key_id FROM data_keys WHERE subject_key = %s ORDER BY version", (subject,)
        ).fetchall()
    return [(bytes(r[0]), str(r[1])) for r in rows]


def memory_blob(platform: Platform, app: str, user: str) -> bytes:
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT content_sealed FROM memories WHERE app_name = %s AND subject_key = %s LIMIT 1",
            (app, subject_key(platform.config.subject_secret, app, user)),
        ).fetchone()
    assert row is not None
    return bytes(row[0])


def key_state(platform: Platform, kms_key: str) -> str:
    return str(platform.kms.describe_key(KeyId=kms_key)["KeyMetadata"].get("KeyState"))


async def test_full_erasure_in_per_user_key_mode_schedules_the_users_kms_key_for_deletion(
    saga: SagaHarness, local_stack: Settings
) -> None:
    app = "per-user-kms"
    target, control = user_ids(2, 88, prefix="kmsmode")
    settings = local_stack.model_copy(update={"task_queue": f"per-user-kms-{uuid.uuid4().hex[:8]}"})
    with build_platform(settings, per_user_kms_keys=True, key_cache_ttl=0.0) as platform:
        harness = SagaHarness(saga.client, platform, settings)
        await harness.seed(app, [target, control], "small", 88)
        secret = platform.config.subject_secret
        target_keys = wrapped_keys(platform, subject_key(secret, app, target))
        control_keys = wrapped_keys(platform, subject_key(secret, app, control))
        assert target_keys
        assert control_keys
        target_kms = {k for _w, k in target_keys}
        control_kms = {k for _w, k in control_keys}
        # one KMS key per user, neither of them the shared wrapping key
        assert len(target_kms) == 1
        assert len(control_kms) == 1
        assert target_kms.isdisjoint(control_kms | {platform.config.kms_key_id})
        (kms_key,) = target_kms
        wrapped, _ = target_keys[0]
        assert platform.kms.decrypt(CiphertextBlob=wrapped, KeyId=kms_key)["Plaintext"]  # usable before
        sealed_before = memory_blob(platform, app, target)
        assert platform.keys.get(key_id_of(sealed_before))  # its data key unwraps before the erasure

        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            result = await harness.erase(app, target)

        assert result.status == "completed", result
        assert key_state(platform, kms_key) == "PendingDeletion"
        # an old copy of the wrapped key (a database backup) can no longer be unwrapped: the key refuses use
        with pytest.raises(ClientError, match="KMSInvalidStateException"):
            platform.kms.decrypt(CiphertextBlob=wrapped, KeyId=kms_key)
        with pytest.raises(DataKeyShredded):
            platform.keys.get(key_id_of(sealed_before))
        assert wrapped_keys(platform, subject_key(secret, app, target)) == []

        # the other user's key is untouched and still unwraps
        (control_key,) = control_kms
        assert key_state(platform, control_key) == "Enabled"
        assert platform.kms.decrypt(CiphertextBlob=control_keys[0][0], KeyId=control_key)["Plaintext"]

        steps = {s.name: s for s in result.steps}
        assert steps["keys"].counts["key_versions"] == len(target_keys)
        body = harness.receipt_body(result.request_id)  # raises unless the signature verifies
        assert body["request_id"] == result.request_id
        assert body["status"] == "completed"
        assert all(v["passed"] for v in body["verifications"])
        final = next(v for v in body["verifications"] if v["phase"] == "final")
        keys_check = next(c for c in final["checks"] if c["check"] == "keys")
        assert keys_check["passed"]
        assert keys_check["counts"]["kms_keys_not_pending_deletion"] == 0

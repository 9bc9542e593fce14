"""A store added as a package of its own: registered through the ``erasure.adapters`` entry point only.

The test writes a throwaway distribution (``notes-store``: its dist-info with an entry point naming
``tests.plugins.notes_store:NotesAdapter``) into a folder put on ``sys.path``, the way ``pip install``
would, and builds a fresh platform: no file of the project changes. A full erasure then covers the new
store in the order its ``after`` asks (after memory, before keys), the final verification checks it, the
receipt lists it, another user's notes stay byte-identical, and a note left behind fails its check.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from stores.operations.fingerprint import user_snapshot
from tests.plugins.notes_store import folder, write_note
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched
from workers.local_secrets import load_secrets
from workers.service import reverify_input
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workers.worker import build_worker
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyResult

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "plugin-notes"


def install_distribution(site: Path, name: str, entry_points: str) -> None:
    """What ``pip install`` leaves for importlib.metadata: a dist-info folder with METADATA and entry points."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


async def test_a_store_registered_by_entry_point_is_erased_verified_and_in_the_receipt(
    saga: SagaHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages"
    install_distribution(site, "notes-store", "[erasure.adapters]\nnotes = tests.plugins.notes_store:NotesAdapter\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("NOTES_STORE_DIR", str(tmp_path / "notes"))
    platform = build_platform(saga.settings, key_cache_ttl=0.0)
    try:
        names = platform.adapters.names
        assert "notes" in names
        assert names.index("memory") < names.index("notes") < names.index("keys")  # its "after", and keys last

        target, control = user_ids(2, 301, prefix="notes")
        await saga.seed(APP, [target, control])
        for user in (target, control):
            for n in range(23):  # three batches of 10
                write_note(platform, APP, user, f"note {n} of someone")
        control_before = await asyncio.to_thread(user_snapshot, platform, APP, control)
        assert control_before["counts"]["notes"] == 23

        settings = saga.settings.model_copy(update={"task_queue": f"plugin-{uuid.uuid4().hex[:8]}"})
        harness = SagaHarness(saga.client, platform, settings)
        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            filed = await harness.file(APP, target)
            result = await harness.result(filed.request_id)
            assert result.status == "completed", result
            steps = {s.name: s for s in result.steps}
            assert steps["notes"].counts == {"notes": 23}
            assert not folder(APP, filed.subject_key).exists() or not any(folder(APP, filed.subject_key).iterdir())
            body = harness.receipt_body(filed.request_id)
            assert "notes" in body["stores"]
            final = next(v for v in body["verifications"] if v["phase"] == "final")
            notes_check = next(c for c in final["checks"] if c["check"] == "notes")
            assert notes_check["passed"]
            assert notes_check["counts"] == {"notes": 0}
            control_after = await asyncio.to_thread(user_snapshot, platform, APP, control)
            assert control_after["notes"] == control_before["notes"]
            # every store, the new one included; only the summaries derived from the target may go (listed)
            assert_untouched({control: control_before}, {control: control_after}, body["derived_rows_removed"])

            # a note dated before the erasure, left behind: re-verification fails exactly the notes check
            left = write_note(platform, APP, target, "left behind")
            old = (datetime.now() - timedelta(days=1)).timestamp()
            os.utime(left, (old, old))
            row = platform.requests.get(filed.request_id)
            again = await saga.client.execute_workflow(
                VERIFIER_WORKFLOW,
                reverify_input(row),
                id=f"reverify-{filed.request_id}",
                task_queue=settings.task_queue,
                result_type=VerifyResult,
            )
            assert not again.passed
            assert {c.check for c in again.checks if not c.passed} == {"notes"}
    finally:
        platform.close()

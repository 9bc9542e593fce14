"""One gate by construction (issue 39): user data changes only in the modules listed here.

``tests.gate_scan`` finds every place in the runtime code that changes user data (SQL ``DELETE``/``UPDATE`` of
the platform's tables, S3 object deletes, cache key deletes, vector store deletes, a subject's directory
removed). Each must be in a module listed below:

- ``PRIMITIVES``: a store's gated primitive, which reads the hold of the data's owners inside the change
  (``held_subjects``, ``refuse_if_held``, ``partition_by_hold`` or ``gated`` from
  ``stores.ledgers.owner_holds``);
- ``NOT_YET_GATED``: modules that change user data whose own change does not read the owners' holds yet; each
  says who reads the hold instead. The list only shrinks: a module that calls the gate fails the test
  until it moves to ``PRIMITIVES`` (it is empty now: every one went through the gate,
  ``tests/integration/test_gate_primitives.py``);
- ``NOT_USER_DATA``: tools and the local stack's own files.

A new module that deletes or updates user data fails ``test_only_listed_modules_change_user_data``, so a new
path cannot forget the gate without a reviewer seeing it added to a list.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

import httpx
import pytest

from stores.infra.seaweedfs import SeaweedMaster
from stores.ledgers.deletion_queue import MARKER_DIRECTORY, FilerDeletionQueue
from tests.gate_scan import Change, calls_any, changes

ROOT = Path(__file__).resolve().parents[2]
GATE = ("held_subjects", "refuse_if_held", "partition_by_hold", "gated")

PRIMITIVES: dict[str, str] = {
    "stores/logs/archive.py": "log segments: each doomed line's writer's hold, per segment under its lock",
    "stores/memory/store.py": "memory writes: a duplicate reinforces no held owner's row (held_subjects); the "
    "agent's own delete: refuse_if_held",
    "stores/memory/eraser.py": "memory rows: partition_by_hold in the deleting transaction",
    "stores/memory/states.py": "memory states (suppress, supersede, decay): partition_by_hold",
    "stores/forgetting/item_forget.py": "item forgetting's memory and state changes: partition_by_hold",
    "stores/operations/lifecycle_replay.py": "the lifecycle journal replayed after a restore",
    "stores/sessions/adk_tables.py": "ADK's sessions, events and user_states: refuse_if_held per transaction",
    "stores/operations/restore.py": "restore replay: artifacts of erased subjects, per batch",
    "stores/qdrant/store.py": "a subject's Qdrant points: gated on the owner, filtered by owner and ids",
    "stores/artifacts/bucket.py": "artifact versions and uploads: gated on the prefix's owner, per batch",
    "stores/artifacts/service.py": "ADK's delete_artifact by the user's own agent: gated on the owner, refused "
    "(OwnerHeld) under a hold",
    "stores/chroma/adapter.py": "a subject's Chroma directory removed (and rebuilt from what stays): gated on the "
    "subject",
    "stores/privacy/keys.py": "the shred: refuse_if_held in its one transaction, before any KMS call or delete",
    "stores/response_cache/cache.py": "a subject's entries and index members: gated on the subject, per batch "
    "(ResponseCache.remove); the cache's own expiry is the server's TTL, which no code of ours runs to gate",
    "stores/memory/search.py": "recall's hit counter and access time: held_subjects in the counting transaction "
    "(a held owner's counters never move)",
    "stores/sessions/reseal.py": "re-seal of plain rows (content preserved): held_subjects in each row's "
    "transaction, a held owner's rows left byte-identical",
    "stores/privacy/key_epochs.py": "re-wrap under a new epoch (the data key preserved): held_subjects in each "
    "page's transaction serialises with a hold being placed; a held owner's key is re-wrapped all the same (an "
    "epoch holding it could never retire); shredded keys never",
}
NOT_YET_GATED: dict[str, str] = {}
NOT_USER_DATA: dict[str, str] = {
    "stores/infra/s3_batch.py": "the batched S3 delete its callers use (they are scanned for delete_versions)",
    "stores/ledgers/deletion_queue.py": "deletes only its own marker file (random bytes it wrote under "
    "MARKER_DIRECTORY, outside /buckets): the queued user files are S3 deletes already made by gated primitives",
    "workers/stack/launcher.py": "the local stack's own state directory",
    "workers/stack/parts.py": "the local stack's own state directory",
    "workers/stack/process.py": "the local stack's pid files",
}


def unlisted(found: list[Change]) -> list[Change]:
    listed = set(PRIMITIVES) | set(NOT_YET_GATED) | set(NOT_USER_DATA)
    return [c for c in found if c.module not in listed]


def test_only_listed_modules_change_user_data() -> None:
    stray = unlisted(changes(ROOT))
    assert not stray, "user data changed outside the gated primitives:\n" + "\n".join(
        f"  {c.module}:{c.line} {c.what}" for c in stray
    )


@pytest.mark.parametrize("module", sorted(PRIMITIVES))
def test_every_primitive_calls_the_gate(module: str) -> None:
    path = ROOT / module
    assert any(c.module == module for c in changes(ROOT, [path])), f"{module} changes nothing: drop it"
    assert calls_any(path, GATE), f"{module} is listed as a gated primitive but never reads the owners' holds"


@pytest.mark.parametrize("module", sorted(NOT_YET_GATED))
def test_the_ungated_list_only_shrinks(module: str) -> None:
    path = ROOT / module
    assert path.exists(), f"{module} is gone: drop it from NOT_YET_GATED"
    assert any(c.module == module for c in changes(ROOT, [path])), f"{module} changes nothing: drop it"
    assert not calls_any(path, GATE), f"{module} now reads the owners' holds: move it to PRIMITIVES"


def test_a_planted_bypass_fails(tmp_path: Path) -> None:
    """The scanner sees a new path's delete, whatever the store: SQL, S3, cache, vector store, files."""
    planted = tmp_path / "activities" / "shortcut.py"
    planted.parent.mkdir()
    planted.write_text(
        "def wipe(conn, s3, cache, qdrant, subject):\n"
        '    conn.execute("DELETE FROM memories WHERE subject_key = %s", (subject,))\n'
        "    conn.execute(\n"
        '        "UPDATE  events SET content = NULL "\n'
        '        "WHERE user_id = %s", (subject,)\n'
        "    )\n"
        '    s3.delete_objects(Bucket="b", Delete={"Objects": []})\n'
        "    cache.unlink(subject)\n"
        '    qdrant.delete("memories", points_selector=[])\n',
        encoding="utf-8",
    )
    stray = unlisted(changes(tmp_path, [planted]))
    assert [c.what for c in sorted(stray, key=lambda c: c.line)] == [
        "DELETE FROM memories",
        "UPDATE events",
        "call delete_objects",
        "call unlink",
        "call delete",
    ]
    assert {c.module for c in stray} == {"activities/shortcut.py"}


def test_a_route_decorator_is_not_a_delete(tmp_path: Path) -> None:
    planted = tmp_path / "console" / "routes.py"
    planted.parent.mkdir()
    planted.write_text('@router.delete("/api/x")\ndef remove() -> None:\n    pass\n', encoding="utf-8")
    assert changes(tmp_path, [planted]) == []


def test_the_deletion_queue_deletes_only_its_own_marker() -> None:
    """Why ``deletion_queue`` is not user data: its one delete is of the marker it wrote itself (random bytes,
    under ``MARKER_DIRECTORY``, outside ``/buckets``); the user files the filer's queue holds were deleted
    through S3 by the gated primitives before the drain is asked for."""
    sent: list[tuple[str, str]] = []

    def filer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        if request.method == "GET":
            return httpx.Response(200, json={"chunks": [{"file_id": "3,01ab"}]})
        return httpx.Response(201 if request.method == "POST" else 204)

    class Master:
        def locations(self, chunk: str) -> list[str]:
            return ["volume:8080"]

        def holds_chunk(self, server: str, chunk: str) -> bool:
            return False

        def nodes(self) -> list[str]:
            return ["volume:8080"]

    queue = FilerDeletionQueue("http://filer:8888", cast(SeaweedMaster, Master()))
    queue._http = httpx.Client(transport=httpx.MockTransport(filer))
    queue.drain(time.monotonic() + 5, lambda _s: None)
    written = [path for method, path in sent if method == "POST"]
    deleted = [path for method, path in sent if method == "DELETE"]
    assert len(written) == 1
    assert written[0].startswith(MARKER_DIRECTORY + "/")
    assert deleted == written

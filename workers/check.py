"""``erasure worker --check``: reach every configured service and check it is ready for the worker.

One line per part (or one JSON document with ``--json``), then exit 0 (all ready) or 1. It changes nothing:
no migration is applied, no bucket or key is created, no search attribute registered (``erasure migrate`` and
the setup job do that).

The parts are checked at once, each in a thread of its own, under one overall deadline (``DEADLINE``, within a
Kubernetes probe's or a compose healthcheck's 60 s): clients make one attempt with short timeouts, and a part
that has not answered when the deadline passes is reported as not reached. The deadline is the whole check's,
whatever a client library does.

- ``postgres``: connects, and every schema migration this build ships is applied (latest version).
- ``temporal``: connects (TLS and codec as the worker does), the namespace exists, and every custom search
  attribute of ``workflows/contracts/search_attributes.py`` is registered with its type.
- ``kms``: the wrapping key (``ERASURE_KMS_KEY_ID``) exists, is enabled and is a symmetric encryption key.
- ``buckets``: the artifact, log and receipt buckets exist; artifacts and logs are versioned.
- ``cache`` (only when a response cache is configured): the Redis-protocol server answers ``PING``.
- ``chroma`` (only when a Chroma backend is configured): ``chromadb`` imports and the backend's directory
  exists and is writable (the erasure removes subjects' directories in it).
- ``data_map``: every place the platform writes user data (tables with a column naming a user, subject or
  session; the buckets' top-level prefixes; cache keyspaces; Chroma and Qdrant collections), discovered from
  catalogs, is claimed by a registered adapter (``claims()``) or the erasure's justified bookkeeping
  (``stores/operations/data_map.py``); an unclaimed place fails it, named.
- ``adapters``: every registered erase adapter loads and together they form a plan (printed in order);
  adapters whose store this platform does not have are named as left out; the stores' database answers
  through the platform's own pool (a plan with Postgres down is not ready).

A failure is one line with the reason (an error code or the first line of the error), never a secret.
Production code: it imports nothing of the local stack.

The console's ``/readyz`` (``console/readiness.py``) runs the parts the console depends on
(``console_parts``: postgres, temporal, and the receipts bucket that anchors its audit log) with the same
``run_parts`` under a shorter deadline.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from botocore.exceptions import ClientError

from workers.local_secrets import Secrets
from workers.settings import Settings

#: seconds the whole check may take: parts that have not answered by then are reported as not reached
DEADLINE = 30.0
#: seconds one connection or one answer may take (single attempt)
TIMEOUT = 5.0


@dataclass(frozen=True)
class PartCheck:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{self.name:<9} {'ok' if self.ok else 'FAIL':<4}  {self.detail}"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def check_postgres(settings: Settings) -> PartCheck:
    import psycopg

    from stores.infra.migrate import discover

    latest = max(m.version for m in discover())
    try:
        conn = psycopg.connect(settings.postgres_url, connect_timeout=int(TIMEOUT), autocommit=True)
    except psycopg.ProgrammingError:  # libpq quotes a malformed URL whole in its message, password and all
        return PartCheck("postgres", False, "the database URL is malformed (not shown: it may hold the password)")
    with conn:
        conn.execute(f"SET statement_timeout = {int(TIMEOUT * 1000)}")
        exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return PartCheck("postgres", False, f"no schema_migrations table: run 'erasure migrate' (latest {latest})")
        applied = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
    missing = sorted({m.version for m in discover()} - applied)
    if missing:
        shown = ", ".join(map(str, missing))
        return PartCheck("postgres", False, f"migrations not applied: {shown}; run 'erasure migrate'")
    return PartCheck("postgres", True, f"schema at version {latest} (latest)")


async def _check_temporal(settings: Settings, secrets: Secrets) -> PartCheck:
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    from workers.temporal_client import connect
    from workflows.contracts.search_attributes import ALL

    client = await connect(settings, secrets)
    namespace = settings.temporal_namespace
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    wrong = []
    for key in ALL:
        registered = listed.custom_attributes.get(key.name)
        if registered is None:
            wrong.append(f"{key.name} missing")
        elif registered != IndexedValueType.ValueType(key.indexed_value_type.value):
            wrong.append(f"{key.name} has another type")
    if wrong:
        return PartCheck("temporal", False, f"namespace {namespace}: search attributes: {', '.join(wrong)}")
    return PartCheck(
        "temporal", True, f"{settings.temporal_target} namespace {namespace}, {len(ALL)} search attributes"
    )


def check_temporal(settings: Settings, secrets: Secrets) -> PartCheck:
    # TIMEOUT, as every other client's: _guarded reports a timeout as "no answer within TIMEOUT", and a thread
    # left behind by a deadline that passed (the console's /readyz runs every few seconds) ends soon after
    return asyncio.run(asyncio.wait_for(_check_temporal(settings, secrets), TIMEOUT))


def check_kms(settings: Settings) -> PartCheck:
    from stores.infra.aws_clients import SINGLE_ATTEMPT, kms_client
    from workers.wiring import aws_endpoints, kms_key_id

    key_id = kms_key_id(settings)
    meta = kms_client(aws_endpoints(settings), SINGLE_ATTEMPT).describe_key(KeyId=key_id)["KeyMetadata"]
    state = meta.get("KeyState", "unknown")
    if state != "Enabled" or not meta.get("Enabled", False):
        return PartCheck("kms", False, f"key {key_id} is {state}, not Enabled")
    if meta.get("KeyUsage") != "ENCRYPT_DECRYPT" or meta.get("KeySpec", "SYMMETRIC_DEFAULT") != "SYMMETRIC_DEFAULT":
        return PartCheck("kms", False, f"key {key_id} is not a symmetric encryption key")
    mode = ", per-user keys" if settings.per_user_kms_keys else ""
    return PartCheck("kms", True, f"key {meta.get('KeyId', key_id)} enabled{mode}")


def check_buckets(settings: Settings, buckets: Mapping[str, bool] | None = None) -> PartCheck:
    """``buckets``: bucket -> must be versioned; by default the worker's three (artifacts and logs versioned)."""
    from stores.infra.aws_clients import SINGLE_ATTEMPT, s3_client
    from workers.wiring import aws_endpoints

    s3 = s3_client(aws_endpoints(settings), SINGLE_ATTEMPT)
    plan = (
        dict(buckets)
        if buckets is not None
        else {settings.artifact_bucket: True, settings.log_bucket: True, settings.receipt_bucket: False}
    )
    problems = []
    for bucket, versioned in plan.items():
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError as exc:
            problems.append(f"{bucket} {_reason(exc)}")
            continue
        if versioned and s3.get_bucket_versioning(Bucket=bucket).get("Status") != "Enabled":
            problems.append(f"{bucket} not versioned")
    if problems:
        return PartCheck("buckets", False, "; ".join(problems))
    with_versions = [bucket for bucket, wanted in plan.items() if wanted]
    note = f" ({', '.join(with_versions)} versioned)" if with_versions else ""
    return PartCheck("buckets", True, f"{', '.join(plan)}{note}")


def check_cache(settings: Settings) -> PartCheck:
    import valkey

    url = settings.response_cache_url
    assert url is not None
    client = valkey.Valkey.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
    try:
        client.ping()
    finally:
        client.close()  # type: ignore[no-untyped-call]
    endpoint = url.split("@")[-1].split("://")[-1]  # never the password
    return PartCheck("cache", True, f"response cache at {endpoint} answers")


def check_chroma(settings: Settings) -> PartCheck:
    import importlib.util
    import os
    from pathlib import Path

    path = settings.chroma_memory_path
    assert path is not None
    if importlib.util.find_spec("chromadb") is None:
        return PartCheck("chroma", False, "chromadb is not installed (pip install 'erasure-orchestrator[chroma]')")
    root = Path(path)
    if not root.is_dir():
        return PartCheck("chroma", False, f"{root} is not a directory")
    if not os.access(root, os.W_OK | os.X_OK):
        return PartCheck("chroma", False, f"{root} is not writable by this user")
    return PartCheck("chroma", True, f"Chroma databases under {root}")


def check_adapters(settings: Settings, secrets: Secrets) -> PartCheck:
    from stores.adapters.interface import Checked
    from workers.wiring import build_platform

    with build_platform(settings, secrets) as platform:
        registry = platform.adapters
        left_out = f"; no store for {', '.join(registry.not_configured)}" if registry.not_configured else ""
        # the erasure's plan (what worker_plan gives a request) and the physical job's stores, apart
        physical = [p.name for p in registry.plan if p.after_sweep]
        saga = [p.name for p in registry.plan if not p.after_sweep]
        plan = "plan: " + ", ".join(saga) + (f"; physical job: {', '.join(physical)}" if physical else "") + left_out
        try:  # the adapters read and write through this pool: a plan over an unreachable database is not ready
            with platform.pool.connection(timeout=TIMEOUT) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            return PartCheck("adapters", False, f"{plan}; the stores' database does not answer ({_reason(exc)})")
        # a store folder's own check (``Checked``: its directory, its client, its server), one line each
        for adapter in registry.in_order():
            if isinstance(adapter, Checked):
                found = adapter.check()
                plan += f"; {adapter.name}: {found.detail}"
                if not found.ok:
                    return PartCheck("adapters", False, plan)
        return PartCheck("adapters", True, plan)


def check_data_map(settings: Settings, secrets: Secrets) -> PartCheck:
    """The data map (``stores.operations.data_map``): every table, bucket prefix, cache keyspace and collection
    holding user data is claimed by a registered adapter or the erasure's justified bookkeeping."""
    from stores.operations import data_map
    from workers.wiring import build_platform

    with build_platform(settings, secrets) as platform:
        judged = data_map.check(platform.store_context, platform.adapters.in_order())
    return PartCheck("data_map", judged.ok, judged.detail())


def _guarded(name: str, check: Callable[[], PartCheck]) -> PartCheck:
    try:
        return check()
    except TimeoutError:
        return PartCheck(name, False, f"no answer within {TIMEOUT:g} s")
    except Exception as exc:  # one line per part, whatever the client library raises
        return PartCheck(name, False, _reason(exc))


def parts(settings: Settings, secrets: Secrets) -> list[tuple[str, Callable[[], PartCheck]]]:
    """The parts this configuration has, in the order they are reported."""
    return [
        ("postgres", lambda: check_postgres(settings)),
        ("temporal", lambda: check_temporal(settings, secrets)),
        ("kms", lambda: check_kms(settings)),
        ("buckets", lambda: check_buckets(settings)),
        *([("cache", lambda: check_cache(settings))] if settings.response_cache_url is not None else []),
        *([("chroma", lambda: check_chroma(settings))] if settings.chroma_memory_path is not None else []),
        ("adapters", lambda: check_adapters(settings, secrets)),
        ("data_map", lambda: check_data_map(settings, secrets)),
    ]


def console_parts(settings: Settings, secrets: Secrets) -> list[tuple[str, Callable[[], PartCheck]]]:
    """The parts the console (``erasure serve``) depends on: its request, approval, token and audit books in
    Postgres; Temporal (its workflows, updates and visibility); the receipts bucket, where the audit log's head
    is anchored (the only bucket its IAM policy reaches). Not KMS (the console seals with the service key),
    not the identity provider (API tokens work without it; a JWT while it is away is answered 503 by the
    route itself)."""
    return [
        ("postgres", lambda: check_postgres(settings)),
        ("temporal", lambda: check_temporal(settings, secrets)),
        ("buckets", lambda: check_buckets(settings, {settings.receipt_bucket: False})),
    ]


def run_parts(checks: list[tuple[str, Callable[[], PartCheck]]], deadline: float = DEADLINE) -> list[PartCheck]:
    """Every part at once, each in a daemon thread (a client stuck past the deadline cannot keep the process
    alive); a part without an answer when the deadline passes is reported as not reached."""
    results: dict[str, PartCheck] = {}
    threads = []
    for name, check in checks:

        def run(name: str = name, check: Callable[[], PartCheck] = check) -> None:
            results[name] = _guarded(name, check)

        thread = threading.Thread(target=run, name=f"check-{name}", daemon=True)
        thread.start()
        threads.append(thread)
    end = time.monotonic() + deadline
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    late = f"not reached: no answer within the check's {deadline:g} s deadline"
    return [results.get(name) or PartCheck(name, False, late) for name, _check in checks]


def run_checks(settings: Settings, secrets: Secrets, deadline: float = DEADLINE) -> list[PartCheck]:
    return run_parts(parts(settings, secrets), deadline)


def main(
    settings: Settings,
    secrets: Secrets,
    echo: Callable[[str], None] = print,
    *,
    as_json: bool = False,
    deadline: float = DEADLINE,
) -> int:
    started = time.monotonic()
    results = run_checks(settings, secrets, deadline)
    ready = all(r.ok for r in results)
    if as_json:
        took = round(time.monotonic() - started, 2)
        echo(json.dumps({"ready": ready, "seconds": took, "parts": [asdict(r) for r in results]}))
    else:
        for result in results:
            echo(result.line())
    return 0 if ready else 1

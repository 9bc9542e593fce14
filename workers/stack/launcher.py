"""``erasure stack up | down | status``: start, stop and report the local stack."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import ClientError

from stores.infra.aws_clients import s3_client
from stores.operations.database import prepare_database
from workers.errors import StackError
from workers.kms_key import resolve_kms_key_id
from workers.local_secrets import create_local_secrets
from workers.settings import Settings
from workers.settings.accessors import CONSOLE_LOGIN
from workers.stack.app_parts import app_parts
from workers.stack.console_login import ensure_console_login
from workers.stack.parts import (
    Part,
    PartStatus,
    all_parts,
    aws_endpoints,
    prune_orphan_postgres,
    remove_root_postgres,
)

Echo = Callable[[str], None]


#: bucket -> versioned? Artifacts and logs are versioned, as production buckets often are: the
#: erasure must then remove every version and delete marker, not just the current object.
def bucket_plan(settings: Settings) -> dict[str, bool]:
    return {settings.artifact_bucket: True, settings.log_bucket: True, settings.receipt_bucket: False}


def ensure_buckets(settings: Settings) -> None:
    s3 = s3_client(aws_endpoints(settings))
    for bucket, versioned in bucket_plan(settings).items():
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError:
            try:
                s3.create_bucket(Bucket=bucket)
            except ClientError as exc:
                raise StackError(f"s3: cannot create bucket {bucket}: {exc.response['Error']['Code']}") from None
        if versioned:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


async def _register_search_attributes(settings: Settings) -> None:
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
    from temporalio.client import Client

    from workflows.contracts.search_attributes import ALL

    client = await Client.connect(settings.temporal_target, namespace=settings.temporal_namespace)
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=settings.temporal_namespace)
    )
    missing = {
        k.name: IndexedValueType.ValueType(k.indexed_value_type.value)
        for k in ALL
        if k.name not in existing.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=settings.temporal_namespace, search_attributes=missing)
        )


def setup(settings: Settings, echo: Echo) -> None:
    """Everything after the processes are healthy: migrations, the console's login, buckets, key, search
    attributes."""
    applied = prepare_database(settings.postgres_url)
    echo(f"  migrations: {'applied ' + ', '.join(map(str, applied)) if applied else 'up to date'}")
    if ensure_console_login(settings):
        echo(f"  console login: {CONSOLE_LOGIN} (erasure_console_rights: the audit log read and appended only)")
    from workers.wiring import build_platform

    with build_platform(settings) as platform:
        rekeyed = platform.ledger.rekey_legacy()
    if rekeyed:
        echo(f"  session tombstones re-keyed: {rekeyed}")
    ensure_buckets(settings)
    echo(f"  buckets: {', '.join(bucket_plan(settings))}")
    echo(f"  kms key: {resolve_kms_key_id(settings)}")
    asyncio.run(_register_search_attributes(settings))
    echo(f"  schedules: late-writer sweep, retention expiry {asyncio.run(_install_schedule(settings))}")


async def _install_schedule(settings: Settings) -> str:
    from workers.schedule import install
    from workers.temporal_client import connect

    return await install(await connect(settings), settings)


def _start(parts: Iterable[Part], echo: Echo) -> None:
    for part in parts:
        what = part.up()
        echo(f"  {part.name:<9} {what:<16} {part.endpoint}")


def up(settings: Settings, echo: Echo = print, parts: Iterable[Part] | None = None) -> None:
    """Start ``parts``; by default the whole stack: the stores, their set-up, then the stack's own processes
    (identity provider, worker, console), which need the migrated database and the search attributes."""
    create_local_secrets(settings)  # the one place secrets are generated (once; later runs read them)
    if os.geteuid() == 0:  # Postgres directories of state directories that are gone (a killed test run)
        for orphan in prune_orphan_postgres():
            echo(f"  removed {orphan} (its state directory is gone)")
    _start(list(parts) if parts is not None else all_parts(settings), echo)
    if parts is None:
        setup(settings, echo)
        _start(app_parts(settings), echo)
        echo(f"Console: {settings.console_base_url}")
        echo(f"Temporal UI: {settings.ui_url}")


def down(settings: Settings, echo: Echo = print, parts: Iterable[Part] | None = None, purge: bool = False) -> None:
    """Stop ``parts`` (by default the whole stack); ``purge``: then delete what the stack stored (``purge``)."""
    chosen = list(parts) if parts is not None else [*all_parts(settings), *app_parts(settings)]
    for part in reversed(chosen):
        if part.embedded:
            echo(f"  {part.name:<9} {'stopped' if part.down() else 'was not running'}")
        else:
            echo(f"  {part.name:<9} external, left alone")
    if purge:
        still = [part.name for part in chosen if part.embedded and part.process().is_running()]
        if still:
            raise StackError(f"not purged: {', '.join(still)} still running")
        for removed in purge_state(settings):
            echo(f"  removed {removed}")


#: what a directory holds once the stack has used it as its state directory
_STATE_MARKS = ("run", "secrets.json")


def _refuse_to_remove(state: Path) -> str | None:
    cwd = Path.cwd().resolve()
    if state == Path(state.anchor) or state == Path.home().resolve() or state == cwd or state in cwd.parents:
        return f"{state} is the root, the home or the working directory or one of its parents"
    if not any((state / mark).exists() for mark in _STATE_MARKS):
        return f"{state} holds no {' or '.join(_STATE_MARKS)}: not a state directory of the stack"
    return None


def purge_state(settings: Settings) -> list[Path]:
    """Delete the stack's data: its root-owned Postgres directory (as root) and its state directory (data,
    logs, pid files and the local secrets). Call it with the stack stopped. The paths removed."""
    removed = []
    if os.geteuid() == 0:
        base = remove_root_postgres(settings)
        if base is not None:
            removed.append(base)
    state = settings.state_path.resolve()
    if state.is_dir():
        why = _refuse_to_remove(state)
        if why:
            raise StackError(f"not purged: {why}")
        shutil.rmtree(state)
        removed.append(state)
    return removed


@dataclass(frozen=True)
class StackStatus:
    parts: list[PartStatus]

    @property
    def all_healthy(self) -> bool:
        return all(p.state in ("healthy", "external-healthy") for p in self.parts)


def status(settings: Settings) -> StackStatus:
    return StackStatus([part.status() for part in [*all_parts(settings), *app_parts(settings)]])

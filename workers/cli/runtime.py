"""Running the orchestrator: the worker (or its readiness check), the database migrations, and the codec
server that lets Temporal UI decode payloads."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.cli.common import Adder, platform_for
from workers.settings import Settings


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.local_secrets import load_secrets

    secrets = load_secrets(settings)
    if args.check:
        from workers import check

        return check.main(settings, secrets, as_json=args.json, deadline=args.deadline)

    from workers.credential_reload import TemporalCredentials
    from workers.temporal_client import connect
    from workers.versioning import deployment_config
    from workers.worker import WorkerCapacity, run_worker

    deployment = deployment_config(settings)  # refused here, before anything connects
    runs = settings.worker_runs  # all, or one of the two workers (each a Deployment of its own)

    async def main() -> None:
        client = await connect(settings, secrets, metrics_port=settings.metrics_port_int)
        credentials = TemporalCredentials(settings, secrets, client, metrics_port=settings.metrics_port_int)
        with platform_for(settings) as platform:
            await run_worker(
                client,
                settings.task_queue if runs != "physical" else None,
                platform,
                secrets.signing_key,
                settings.chaos_pause_seconds,
                credentials=credentials,
                deployment=deployment,
                physical_task_queue=settings.physical_task_queue if runs != "erasure" else None,
                capacity=WorkerCapacity.from_settings(settings),
            )

    asyncio.run(main())
    return 0


def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    from stores.operations.database import prepare_database

    applied = prepare_database(settings.postgres_url)
    print(f"migrations: {'applied ' + ', '.join(map(str, applied)) if applied else 'up to date'}")
    with platform_for(settings) as platform:
        rekeyed = platform.ledger.rekey_legacy()
    if rekeyed:
        print(f"session tombstones re-keyed (session ids hashed and sealed): {rekeyed}")
    return 0


def _codec_server(args: argparse.Namespace, settings: Settings) -> int:
    from workers.codec_server import serve

    serve(settings, args.port)
    return 0


def _add_worker(sub: Any) -> None:
    worker = sub.add_parser("worker", help="run the worker (all workflows and activities)")
    worker.add_argument(
        "--check",
        action="store_true",
        help="instead of running: check Postgres (schema), Temporal (namespace, search attributes), the KMS key "
        "and the buckets, one line each; exit 0 when all are ready, 1 if not",
    )
    worker.add_argument("--json", action="store_true", help="with --check: one JSON document instead of lines")
    worker.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="with --check: seconds the whole check may take; parts not answering by then are reported (30)",
    )
    worker.set_defaults(handler=_worker)


def _add_migrate(sub: Any) -> None:
    sub.add_parser("migrate", help="create google-adk's tables if missing and apply migrations").set_defaults(
        handler=_migrate
    )


def _add_codec_server(sub: Any) -> None:
    cs = sub.add_parser("codec-server", help="serve the payload codec so Temporal UI can decode payloads")
    cs.add_argument("--port", type=int, default=8081, help="port to listen on (default 8081)")
    cs.set_defaults(handler=_codec_server)


COMMANDS: dict[str, Adder] = {"worker": _add_worker, "migrate": _add_migrate, "codec-server": _add_codec_server}

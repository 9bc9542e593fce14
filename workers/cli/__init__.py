"""The ``erasure`` command line for compliance staff and operators: the composition root that gathers every
package's commands (one module per group here: ``dev``, ``runtime``, ``requests``, ``holds``, ``receipts``,
``maintenance``, ``schedules``; their siblings ``workers.deployment_commands``, ``workers.forget_commands`` and
``workers.memory_commands``; ``console.commands``)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence

import psycopg

from stores.infra.errors import StoreError
from workers import tracing
from workers.errors import ErasureCliError
from workers.logging_setup import configure_logging
from workers.settings import Settings

Handler = Callable[[argparse.Namespace, Settings], int]

#: commands of the local development stack and its synthetic data: refused in production mode (the image's
#: default), where they would start embedded servers or write made-up users into real stores
DEV_ONLY: dict[str, str] = {
    "stack": "starts, stops and inspects the local development stack",
    "demo": "runs an erasure of synthetic users on the local development stack",
    "seed": "writes synthetic users into the stores",
}


def refuse_in_production(command: str, environ: Mapping[str, str]) -> str | None:
    """The one line refusing a development command in production mode, or ``None`` when it may run. Read
    from the environment before the settings are built: a production image without its settings says what
    the command is, not which settings it lacks."""
    mode = next((v for k, v in environ.items() if k.upper() == "ERASURE_MODE"), "")
    if command in DEV_ONLY and mode.strip().lower() == "production":
        return (
            f"'erasure {command}' {DEV_ONLY[command]}: a development command, refused in production mode "
            "(ERASURE_MODE=production)"
        )
    return None


#: the order ``erasure --help`` lists the commands in; each group module (``workers/cli/``) adds its own, and
#: ``console`` stands for the console's (``serve``, ``token``, ``audit``: ``console.commands``)
ORDER = (
    "stack",
    "worker",
    "migrate",
    "seed",
    "request",
    "status",
    "list",
    "hold",
    "release",
    "receipt",
    "verify",
    "demo",
    "replay-tombstones",
    "schedule",
    "reseal-sessions",
    "console",
    "codec-server",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erasure", description="Durable right-to-be-forgotten orchestration.")
    sub = parser.add_subparsers(dest="command", required=True)

    from console import commands as console_commands
    from workers import deployment_commands, forget_commands, memory_commands
    from workers.cli import dev, holds, maintenance, receipts, requests, runtime, schedules
    from workers.cli.common import add_user_arguments

    groups = (dev, runtime, requests, holds, receipts, maintenance, schedules)
    commands = {name: add for group in groups for name, add in group.COMMANDS.items()}
    commands["console"] = console_commands.register
    for name in sorted(commands, key=ORDER.index):  # a command missing from ORDER fails here, loudly
        commands[name](sub)
    deployment_commands.register(sub)
    forget_commands.register(sub, add_user_arguments)
    memory_commands.register(sub, add_user_arguments)
    return parser


#: the service name of a command's spans (``service.name``)
SERVICE_NAMES = {"worker": "erasure-worker", "serve": "erasure-console"}


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")  # pgserver's platformdirs, harmless
    parser = build_parser()
    args = parser.parse_args(argv)
    refusal = refuse_in_production(args.command, os.environ)
    if refusal:
        print(f"erasure: error: {refusal}", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env()
        configure_logging(settings.log_format)
        tracing.configure(settings, SERVICE_NAMES.get(args.command, "erasure-cli"))
        handler: Handler = args.handler
        return handler(args, settings)
    except (ErasureCliError, StoreError) as exc:
        print(f"erasure: error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"erasure: error: cannot reach Postgres: {first}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def run() -> None:
    """Console entry point. Exits without interpreter finalisation: the Temporal client's native runtime
    threads can abort a finalising interpreter (PyGILState_Release), turning success into SIGABRT."""
    code = main()
    tracing.shutdown()  # the spans still buffered: os._exit runs no exit handlers
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

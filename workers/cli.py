"""The ``erasure`` command line for compliance staff and operators: the composition root that gathers every
package's commands (``workers.commands`` and its siblings, ``console.commands``)."""

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


def _stack_up(_args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack import launcher

    print(f"Starting the local stack (state: {settings.state_path})")
    launcher.up(settings)
    return 0


def _stack_down(args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack import launcher

    launcher.down(settings, purge=args.purge)
    return 0


def _stack_status(_args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack import launcher

    st = launcher.status(settings)
    for part in st.parts:
        extra = f"  ({part.detail})" if part.detail else ""
        print(f"  {part.name:<9} {part.state:<22} {part.endpoint}{extra}")
    print(f"Temporal UI: {settings.ui_url}")
    return 0 if st.all_healthy else 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erasure", description="Durable right-to-be-forgotten orchestration.")
    sub = parser.add_subparsers(dest="command", required=True)

    stack = sub.add_parser("stack", help="start, stop and inspect the local stack (development only)")
    stack_sub = stack.add_subparsers(dest="stack_command", required=True)
    stack_sub.add_parser("up", help="start every part, apply migrations, create buckets and key").set_defaults(
        handler=_stack_up
    )
    down = stack_sub.add_parser("down", help="stop exactly the processes 'up' started")
    down.add_argument(
        "--purge",
        action="store_true",
        help="then delete the stack's data: its state directory (secrets included) and, as root, its Postgres "
        "directory under /var/lib/erasure-orchestrator",
    )
    down.set_defaults(handler=_stack_down)
    stack_sub.add_parser("status", help="running/healthy/stopped per part").set_defaults(handler=_stack_status)

    from console import commands as console_commands
    from workers import commands, deployment_commands, forget_commands, memory_commands

    commands.register(sub, console_commands.register)
    deployment_commands.register(sub)
    forget_commands.register(sub, commands.add_user_arguments)
    memory_commands.register(sub, commands.add_user_arguments)
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


if __name__ == "__main__":
    run()

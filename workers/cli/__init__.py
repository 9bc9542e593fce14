"""The ``erasure`` command line for compliance staff and operators: the composition root that gathers every
package's commands (one module per group here: ``dev``, ``runtime``, ``requests``, ``holds``, ``receipts``,
``maintenance``, ``schedules``; their siblings ``workers.deployment_commands``, ``workers.forget_commands`` and
``workers.memory_commands``; ``console.commands``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence

import psycopg
from botocore.exceptions import EndpointConnectionError

from stores.infra.errors import NotApproved, RequestNotFound, StoreError
from workers import tracing
from workers.errors import ErasureCliError, ExitCode
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


def version() -> str:
    """The installed distribution's version (``erasure --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("erasure-orchestrator")
    except PackageNotFoundError:  # run from a checkout without installing it
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="erasure",
        description="Durable right-to-be-forgotten orchestration.",
        epilog="Exit codes: 0 ok, 1 not done, 2 usage, 3 not found, 4 verification failed, 5 refused, "
        "6 unreachable, 70 internal error, 130 interrupted (docs/operations.md, 'Exit codes').",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
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
        return ExitCode.REFUSED
    try:
        settings = Settings.from_env()
        configure_logging(settings.log_format)
        tracing.configure(settings, SERVICE_NAMES.get(args.command, "erasure-cli"))
        handler: Handler = args.handler
        return handler(args, settings)
    except ErasureCliError as exc:
        return _failed(str(exc), exc.exit_code)
    except StoreError as exc:
        return _failed(str(exc), STORE_ERRORS.get(type(exc), ExitCode.USAGE))
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _failed(f"cannot reach Postgres: {first}", ExitCode.UNREACHABLE)
    except EndpointConnectionError as exc:
        return _failed(f"cannot reach {exc.kwargs.get('endpoint_url', 'an AWS endpoint')}", ExitCode.UNREACHABLE)
    except BrokenPipeError:  # ``erasure list | head``: the reader left; not an error (Python's own recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as exc:  # never a traceback: the type only (a message could quote a user's data)
        said = f"unexpected {type(exc).__name__} (a bug: please report the command that caused it)"
        return _failed(said, ExitCode.INTERNAL)


#: the store errors a command can end with, by kind (any other: usage)
STORE_ERRORS: dict[type[StoreError], ExitCode] = {
    RequestNotFound: ExitCode.NOT_FOUND,
    NotApproved: ExitCode.REFUSED,
}


def _failed(message: str, code: int) -> int:
    print(f"erasure: error: {message}", file=sys.stderr)
    return code


def run() -> None:
    """Console entry point. Exits without interpreter finalisation: the Temporal client's native runtime
    threads can abort a finalising interpreter (PyGILState_Release), turning success into SIGABRT."""
    code = main()
    tracing.shutdown()  # the spans still buffered: os._exit runs no exit handlers
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):  # the reader left before the last lines (``| head``)
            stream.flush()
    os._exit(code)

"""Development commands: the local stack (``stack up|down|status``), synthetic users (``seed``) and the demo.
Refused in production mode (``workers.cli.DEV_ONLY``)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.cli.common import Adder, platform_for
from workers.settings import Settings


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


def _seed(args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack.seeding.seeder import seed_platform, user_ids

    users = user_ids(args.users, args.seed, args.prefix)
    with platform_for(settings) as platform:
        report = asyncio.run(
            seed_platform(platform, args.app, users, args.size, args.seed, progress=lambda m: print(f"  {m}"))
        )
    events = sum(u.events for u in report.users)
    artifacts = sum(u.artifact_versions for u in report.users)
    memories = sum(len(u.memory_ids) for u in report.users)
    print(
        f"seeded {len(report.users)} {args.size} users in app {args.app}: {events} events, "
        f"{artifacts} artifact versions, {memories} memory rows, {report.summaries} cross-user summaries, "
        f"{report.log_segments} log segments"
    )
    return 0


def _demo(_args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    return run_demo(settings)


def _add_stack(sub: Any) -> None:
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


def _add_seed(sub: Any) -> None:
    seed = sub.add_parser(
        "seed", help="fill the stores with synthetic users through the real services (development only)"
    )
    seed.add_argument("--users", type=int, default=5)
    seed.add_argument("--size", choices=["small", "typical", "large"], default="typical")
    seed.add_argument("--seed", type=int, default=1)
    seed.add_argument("--app", default="support-agent")
    seed.add_argument("--prefix", default="user", help="user id prefix (ids are PREFIX-SEED-NNNN@example.org)")
    seed.set_defaults(handler=_seed)


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run a real erasure end to end on the local stack (development only)")
    demo.set_defaults(handler=_demo)


COMMANDS: dict[str, Adder] = {"stack": _add_stack, "seed": _add_seed, "demo": _add_demo}

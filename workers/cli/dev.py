"""Development commands: the local stack (``stack up|down|status``), synthetic users (``seed``) and the demo.
Refused in production mode (``workers.cli.DEV_ONLY``)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.cli.common import Adder, add_json, platform_for, positive_int, print_json
from workers.errors import ExitCode
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
    return ExitCode.OK if st.all_healthy else ExitCode.UNREACHABLE


#: from this many users ``erasure seed`` writes in bulk (``workers.stack.seeding.bulk_seed``: each store's own
#: format, COPY and concurrent puts) instead of through the services one user at a time (~0.6 s a user)
BULK_FROM = 200
BULK_CHUNK = 100  # users per bulk chunk: a progress line each


def _seed(args: argparse.Namespace, settings: Settings) -> int:
    from workers.progress_view import Throughput
    from workers.stack.seeding.seeder import user_ids

    users = user_ids(args.users, args.seed, args.prefix)
    meter = Throughput(len(users), "users")
    bulk = len(users) >= BULK_FROM if args.bulk is None else args.bulk
    done = 0

    def step(_message: str, by: int = 1) -> None:
        nonlocal done
        done = min(done + by, len(users))
        meter.show(done)

    with platform_for(settings) as platform:
        if bulk:
            from workers.stack.seeding.bulk_seed import bulk_seed

            report = asyncio.run(
                bulk_seed(
                    platform,
                    args.app,
                    users,
                    args.size,
                    args.seed,
                    chunk_size=BULK_CHUNK,
                    progress=lambda m: step(m, BULK_CHUNK),
                )
            )
            summary = {"users": len(users), "size": args.size, "app": args.app, "bulk": True, **report.summary()}
            said = (
                f"seeded {len(users)} {args.size} users in bulk in app {args.app}: {report.total_rows} rows, "
                f"{report.objects} objects, {report.log_lines} log lines in {report.seconds:.1f} s "
                "(no response cache or Chroma entries: seed fewer than "
                f"{BULK_FROM} users, or --no-bulk, for those)"
            )
        else:
            from workers.stack.seeding.seeder import seed_platform

            seeded = asyncio.run(seed_platform(platform, args.app, users, args.size, args.seed, progress=step))
            events = sum(u.events for u in seeded.users)
            artifacts = sum(u.artifact_versions for u in seeded.users)
            memories = sum(len(u.memory_ids) for u in seeded.users)
            summary = {
                "users": len(seeded.users),
                "size": args.size,
                "app": args.app,
                "bulk": False,
                "events": events,
                "artifact_versions": artifacts,
                "memory_rows": memories,
                "summaries": seeded.summaries,
                "log_segments": seeded.log_segments,
            }
            said = (
                f"seeded {len(seeded.users)} {args.size} users in app {args.app}: {events} events, "
                f"{artifacts} artifact versions, {memories} memory rows, {seeded.summaries} cross-user summaries, "
                f"{seeded.log_segments} log segments"
            )
    if args.json:
        print_json(summary)
    else:
        print(said)
    return ExitCode.OK


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
    seed.add_argument("--users", type=positive_int, default=5, help="how many users (default 5)")
    seed.add_argument(
        "--size", choices=["small", "typical", "large"], default="typical", help="how much data each user has"
    )
    seed.add_argument("--seed", type=int, default=1, help="random seed: the same seed gives the same users")
    seed.add_argument("--app", default="support-agent", help="the app name to seed the users under")
    seed.add_argument("--prefix", default="user", help="user id prefix (ids are PREFIX-SEED-NNNN@example.org)")
    seed.add_argument(
        "--bulk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"write in bulk (each store's own format; default from {BULK_FROM} users) or through the services",
    )
    add_json(seed)
    seed.set_defaults(handler=_seed)


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run a real erasure end to end on the local stack (development only)")
    demo.set_defaults(handler=_demo)


COMMANDS: dict[str, Adder] = {"stack": _add_stack, "seed": _add_seed, "demo": _add_demo}

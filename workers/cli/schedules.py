"""The scheduled jobs: ``schedule install|list|pause|resume|trigger`` (late writers, retention expiry, key
epochs, physical clean-up, reconciler)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from typing import Any

from workers.cli.common import Adder, add_json, print_json
from workers.errors import ExitCode
from workers.settings import Settings


def _schedule(args: argparse.Namespace, settings: Settings) -> int:
    from workers import schedule
    from workers.temporal_client import connect

    async def main() -> int:
        client = await connect(settings)
        chosen = schedule.BY_NAME[args.sweep]
        if args.schedule_command == "install":
            outcome = await schedule.install(client, settings)
            print(f"schedules {', '.join(schedule.BY_NAME.values())}: {outcome}")
        elif args.schedule_command == "list":
            views = await schedule.list_schedules(client)
            if args.json:
                print_json([dataclasses.asdict(v) for v in views])
                return ExitCode.OK
            for v in views:
                state = "paused" if v.paused else "active"
                print(f"{v.schedule_id}  {state}  every {v.every}  recent runs {v.recent_runs}  next {v.next_runs[:1]}")
            if not views:
                print("no schedules (run 'erasure schedule install')")
        elif args.schedule_command == "pause":
            await schedule.pause(client, schedule_id=chosen)
            print(f"schedule {chosen}: paused")
        elif args.schedule_command == "resume":
            await schedule.resume(client, schedule_id=chosen)
            print(f"schedule {chosen}: resumed")
        else:
            await schedule.trigger(client, schedule_id=chosen)
            print(f"schedule {chosen}: triggered (skipped if a run is still going)")
        return ExitCode.OK

    return asyncio.run(main())


def _add_schedule(sub: Any) -> None:
    from workers.schedule import BY_NAME

    sc = sub.add_parser(
        "schedule",
        help="manage the scheduled jobs (late writers, retention expiry, key epochs, physical clean-up, reconciler)",
    )
    sc.add_argument(
        "schedule_command",
        choices=["install", "list", "pause", "resume", "trigger"],
        help="install (or update) every schedule, list them, or pause/resume/trigger the one --sweep names",
    )
    sc.add_argument(
        "--sweep",
        choices=sorted(BY_NAME),
        default="late-writer",
        help="which schedule pause/resume/trigger act on (install and list cover all of them)",
    )
    add_json(sc)  # list only: the others print one line of what they did
    sc.set_defaults(handler=_schedule)


COMMANDS: dict[str, Adder] = {"schedule": _add_schedule}

"""Legal holds: ``hold`` and ``release`` a subject, recorded in the hold store, then told to its request."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.cli.common import Adder, add_json, platform_for, print_json
from workers.errors import ExitCode
from workers.settings import Settings


def _hold(args: argparse.Namespace, settings: Settings, place: bool) -> int:
    """Record the hold change in the hold store (what every saga reads), then tell the running request.

    The store is the authority: a running saga reads it right before every destructive step, so a hold
    placed here is honoured even when the signal cannot be delivered. The output says which happened.
    """
    from workers.service import HoldNotDelivered, signal_hold_change, validate_request
    from workers.temporal_client import connect
    from workflows.erasure import HOLD_RECHECK_MAX

    async def main() -> int:
        with platform_for(settings) as platform:
            subject = validate_request(platform, args.app, args.user)
            if place:
                changed = platform.requests.place_hold(subject, args.app, args.reason, args.by)
            else:
                changed = platform.requests.release_hold(subject, args.reason, args.by)
            active = platform.requests.active_for(subject)
            request_id, undelivered = None, ""
            try:
                client = await connect(settings)
                request_id = await signal_hold_change(client, platform, subject)
            except HoldNotDelivered as exc:
                undelivered = exc.why
            except RuntimeError:  # Client.connect: the frontend cannot be reached
                if active is not None:
                    undelivered = f"Temporal at {settings.temporal_target} cannot be reached"
        what = "placed" if place else "released"
        if args.json:
            print_json(
                {
                    "subject_key": subject,
                    "hold": what if changed else "unchanged",
                    "active_request": active.request_id if active is not None else None,
                    "notified": request_id is not None,
                    "not_notified_because": undelivered or None,
                }
            )
            return ExitCode.OK if changed else ExitCode.NOT_DONE
        if not changed:
            print(f"no change: a hold was {'already placed' if place else 'not in place'} for {subject}")
            return ExitCode.NOT_DONE
        print(f"hold {what} for {subject} (recorded in the hold store)")
        if active is None:
            print(
                "  no erasure request is running for this subject"
                + ("; a new one waits for the release" if place else "")
            )
        elif request_id:
            print(f"  request {request_id} notified")
        else:
            print(f"  request {active.request_id} was NOT notified: {undelivered}")
        if active is not None and place:
            print("  the request reads the hold store before its next destructive step and stops there")
        elif active is not None and not request_id:
            hours = int(HOLD_RECHECK_MAX.total_seconds() // 3600)
            print(f"  it resumes at its next re-check of the hold store (within {hours} hours), or run this again")
        return ExitCode.OK

    return asyncio.run(main())


def _adder(name: str, place: bool) -> Adder:
    def add(sub: Any) -> None:
        hp = sub.add_parser(name, help=f"{'place' if place else 'release'} a legal hold for a subject")
        hp.add_argument("--app", required=True, help="the app name the subject's data is under")
        hp.add_argument("--user", required=True, help="the user id exactly as the platform stores it")
        hp.add_argument("--reason", required=True, help="why (e.g. the case); recorded with the hold")
        hp.add_argument("--by", help="who decided")
        add_json(hp)
        hp.set_defaults(handler=lambda a, s, place=place: _hold(a, s, place))

    return add


COMMANDS: dict[str, Adder] = {name: _adder(name, place) for name, place in (("hold", True), ("release", False))}

"""``erasure deployment``: roll workflow code out and back with Temporal's Worker Deployments.

``status`` shows which build id gets new workflows, the ramp, and each version's state (``draining``: pinned
workflows still open on it, keep its workers; ``drained``: its workers may go). ``set-current BUILD_ID`` sends
every new workflow to that version (rollout, and rollback: set the previous one back); ``ramp BUILD_ID
PERCENT`` sends a share of new workflows to a version first, ``ramp --off`` removes the ramp. The deployment
is ``ERASURE_WORKER_DEPLOYMENT_NAME`` unless ``--name`` says otherwise. The same operations are in
Temporal's CLI (``temporal worker deployment ...``); the procedure is in deploy/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.errors import ErasureCliError
from workers.settings import Settings


def _name(args: argparse.Namespace, settings: Settings) -> str:
    name = str(args.name or settings.worker_deployment_name)
    if not name:
        raise ErasureCliError("no Worker Deployment: set ERASURE_WORKER_DEPLOYMENT_NAME or pass --name")
    return name


def _deployment(args: argparse.Namespace, settings: Settings) -> int:
    from workers import versioning
    from workers.temporal_client import connect

    name = _name(args, settings)

    async def main() -> int:
        client = await connect(settings)
        if args.deployment_command == "set-current":
            previous = await versioning.set_current(client, name, args.build_id, wait_seconds=args.wait)
            print(f"deployment {name}: current {args.build_id} (was {previous or '(unversioned)'})")
        elif args.deployment_command == "ramp":
            if args.off == bool(args.build_id):
                raise ErasureCliError("give BUILD_ID PERCENT, or --off")
            if not args.off and not 0 < args.percent <= 100:
                raise ErasureCliError("PERCENT is more than 0 and at most 100")
            await versioning.set_ramping(client, name, args.build_id or "", args.percent, wait_seconds=args.wait)
        state = await versioning.describe_deployment(client, name)
        print("\n".join(state.lines()))
        return 0

    return asyncio.run(main())


def register(sub: Any) -> None:
    dp = sub.add_parser("deployment", help="worker versioning: show, ramp or set the current build id")
    dp.add_argument("--name", default="", help="the Worker Deployment (default: ERASURE_WORKER_DEPLOYMENT_NAME)")
    dp_sub = dp.add_subparsers(dest="deployment_command", required=True)
    dp_sub.add_parser("status", help="current and ramping build ids, each version's state").set_defaults(
        handler=_deployment
    )
    cur = dp_sub.add_parser("set-current", help="send new workflows to BUILD_ID (rollout; rollback: the old one)")
    cur.add_argument("build_id", help="the build id to make current (all new workflow tasks go to it)")
    ramp = dp_sub.add_parser("ramp", help="send PERCENT of new workflows to BUILD_ID; --off removes the ramp")
    ramp.add_argument("build_id", nargs="?", default="", help="the build id to ramp to")
    ramp.add_argument("percent", nargs="?", type=float, default=0.0, help="the share of new workflows it gets (0-100)")
    ramp.add_argument("--off", action="store_true", help="stop the ramp (the current build takes everything)")
    for p in (cur, ramp):
        p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the version's workers to poll")
        p.set_defaults(handler=_deployment)

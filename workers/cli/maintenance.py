"""Maintenance of the stores' data: after restoring a backup, re-apply every erasure and lifecycle transition
(``replay-tombstones``); seal session rows written before sealing (``reseal-sessions``)."""

from __future__ import annotations

import argparse
from typing import Any

from workers.cli.common import Adder, platform_for
from workers.settings import Settings


def _replay_tombstones(_args: argparse.Namespace, settings: Settings) -> int:
    from stores.operations.lifecycle_replay import replay_lifecycle
    from stores.operations.restore import replay_tombstones

    with platform_for(settings) as platform:
        entries, totals = replay_tombstones(platform)
        transitions, lifecycle = replay_lifecycle(platform)

    def listed(counts: dict[str, int], held: bool) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v and k.endswith("_held") == held)

    removed = listed(totals, held=False) or "nothing to remove"
    print(f"replayed {entries} erasures from the tombstone journal: {removed}")
    changed = listed(lifecycle, held=False) or "nothing to change"
    print(f"replayed {transitions} memory lifecycle transitions (forgets, expiries, evictions, corrections): {changed}")
    # what a legal hold kept (the owner's hold wins over the replay): said, never counted as removed
    kept = ", ".join(part for part in (listed(totals, held=True), listed(lifecycle, held=True)) if part)
    print(f"kept under a legal hold: {kept or 'nothing'}")
    return 0


def _reseal_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from workers.reseal_command import run

    return run(args, settings)


def _add_replay_tombstones(sub: Any) -> None:
    sub.add_parser(
        "replay-tombstones",
        help="after restoring a backup: re-apply every erasure and memory lifecycle transition before data goes live",
    ).set_defaults(handler=_replay_tombstones)


def _add_reseal_sessions(sub: Any) -> None:
    rs = sub.add_parser("reseal-sessions", help="seal google-adk session rows written before sealing (resumable)")
    rs.add_argument("--page-size", type=int, default=200, help="rows per transaction (default 200)")
    rs.add_argument("--pages-per-run", type=int, default=100, help="pages per workflow run (then continue-as-new)")
    rs.add_argument("--no-wait", action="store_true", help="start it and return (progress: run it again)")
    rs.set_defaults(handler=_reseal_sessions)


COMMANDS: dict[str, Adder] = {"replay-tombstones": _add_replay_tombstones, "reseal-sessions": _add_reseal_sessions}

"""Erasure requests: file one (``request``), follow one (``status``; a forget's ``fr_`` id too), list them."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from stores.books.requests import ACTIVE_STATES, FINAL_STATES
from workers.cli.common import Adder, add_json, add_user_arguments, platform_for, positive_int, print_json
from workers.errors import ExitCode, NotFoundError
from workers.settings import Settings


async def _follow(client: Any, request_id: str, interval: float = 0.5, *, show: bool = True) -> str:
    from workers.progress_view import LiveDisplay, render
    from workers.service import progress

    display = LiveDisplay()
    while True:
        current = await progress(client, request_id)
        if current is not None:
            if show:
                display.show(render(current))
            if current.stage == "done" or current.status in ("failed",):
                return current.status
        await asyncio.sleep(interval)


def _warn_other_spellings(platform: Any, app: str, user_id: str) -> None:
    from workers.service import other_spellings_with_data

    others = other_spellings_with_data(platform, app, user_id)
    if others:
        print(
            f"warning: {len(others)} other spelling(s) of this user id (trimmed or Unicode-normalised) hold data "
            f"in {app}; identity is exact, so they are not erased with it. If they are the same person, file each:",
            file=sys.stderr,
        )
        for other in others:
            print(f"  erasure request --app {app} --user-hex {other.encode().hex()}", file=sys.stderr)


def waits_at_filing(on_hold: bool, delay_seconds: int, now: datetime) -> dict[str, Any]:
    """What a request filed now waits for, said at filing: a legal hold (it starts only after the release)
    and the ingestion delay before the second sweep (its earliest end, the main pass taking no time)."""
    earliest = None if on_hold else now + timedelta(seconds=delay_seconds)
    return {"on_hold": on_hold, "ingestion_delay_seconds": delay_seconds, "earliest_end": earliest}


def _said(waits: dict[str, Any]) -> list[str]:
    lines = []
    if waits["on_hold"]:
        lines.append(
            "  ON HOLD: a legal hold is active for this subject; nothing is erased until it is released "
            "(erasure release ...)"
        )
    minutes = waits["ingestion_delay_seconds"] // 60
    if waits["earliest_end"] is not None and minutes:
        lines.append(
            f"  waits {minutes} min after the main pass for late writers (ERASURE_INGESTION_DELAY_SECONDS): "
            f"done at the earliest {waits['earliest_end']:%Y-%m-%d %H:%M} UTC"
        )
    return lines


def _request(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import exact_user_id, file_request, ui_link
    from workers.temporal_client import connect

    user_id = exact_user_id(args.user, args.user_hex)

    async def main() -> int:
        with platform_for(settings) as platform:
            client = await connect(settings)
            filed = await file_request(
                client,
                platform,
                settings,
                app_name=args.app,
                user_id=user_id,
                reason=args.reason,
                requested_by=args.requested_by,
                due=args.due,
            )
            _warn_other_spellings(platform, args.app, user_id)
            held = platform.requests.active_hold(filed.subject_key) is not None
        waits = waits_at_filing(held, settings.ingestion_delay, datetime.now(UTC))
        link = ui_link(settings, filed.request_id)
        if args.json:  # with --wait: followed quietly, then one document with the final status
            status = await _follow(client, filed.request_id, show=False) if args.wait else None
            print_json(
                {
                    "request_id": filed.request_id,
                    "subject_key": filed.subject_key,
                    "attached": filed.attached,
                    "due_at": filed.due_at,
                    "waits": waits,
                    "temporal_ui": link,
                    **({"status": status} if args.wait else {}),
                }
            )
            return ExitCode.OK if status in (None, "completed") else ExitCode.NOT_DONE
        verb = "attached to the running request" if filed.attached else "filed"
        print(f"{verb}: {filed.request_id}  (subject {filed.subject_key}, due {filed.due_at:%Y-%m-%d})")
        print("\n".join(_said(waits)) or "  waits: nothing (no hold; no ingestion delay)")
        print(f"Temporal UI: {link}")
        if args.wait:
            status = await _follow(client, filed.request_id)
            return ExitCode.OK if status == "completed" else ExitCode.NOT_DONE
        return ExitCode.OK

    return asyncio.run(main())


def forget_status(request_id: str, settings: Settings, as_json: bool = False) -> int:
    """``erasure status fr_...``: a forget filed without ``--wait`` can be followed (it said no such request)."""
    from stores.infra.errors import RequestNotFound

    with platform_for(settings) as platform:
        try:
            row = platform.forget_requests.get(request_id)
        except RequestNotFound:
            raise NotFoundError(f"no forget request {request_id}") from None
    fine = row.state in ("completed", "received", "running", "pending_approval")
    if as_json:
        print_json(
            {
                "request_id": row.request_id,
                "kind": "forget",
                "app_name": row.app_name,
                "subject_key": row.subject_key,
                "strength": row.strength,
                "state": row.state,
                "received_at": row.received_at,
                "items": len(row.memory_ids),
                "outcome": dict(row.outcome or {}),
            }
        )
        return ExitCode.OK if fine else ExitCode.NOT_DONE
    print(f"forget {row.request_id}  app {row.app_name}  subject {row.subject_key}  strength {row.strength}")
    print(f"  state {row.state}  received {row.received_at:%Y-%m-%d %H:%M}  items {len(row.memory_ids)}")
    if row.outcome:
        print("  " + ", ".join(f"{k}={v}" for k, v in sorted(row.outcome.items())))
    return ExitCode.OK if fine else ExitCode.NOT_DONE


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from workers.progress_view import render
    from workers.service import days_left, progress, ui_link
    from workers.temporal_client import connect

    if args.request_id.startswith("fr_"):  # a forget: its own store and workflow
        return forget_status(args.request_id, settings, args.json)

    async def main() -> int:
        with platform_for(settings) as platform:
            row = platform.requests.get(args.request_id)
        client = await connect(settings)
        if args.watch and row.state in ("received", "running", "on_hold"):
            status = await _follow(client, args.request_id)
            return ExitCode.OK if status == "completed" else ExitCode.NOT_DONE
        if args.json:
            current = await progress(client, args.request_id)
            print_json(
                {
                    "request_id": row.request_id,
                    "kind": "erasure",
                    "app_name": row.app_name,
                    "subject_key": row.subject_key,
                    "state": row.state,
                    "received_at": row.received_at,
                    "due_at": row.due_at,
                    "days_left": days_left(row) if row.state in ACTIVE_STATES else None,
                    "failed_step": row.record.failed_step,
                    "failure_reason": row.record.failure_reason,
                    "fence_after_failure": row.record.fence_after_failure,
                    "progress": dataclasses.asdict(current) if current is not None else None,
                    "temporal_ui": ui_link(settings, row.request_id),
                }
            )
            return ExitCode.OK
        print(f"request {row.request_id}  app {row.app_name}  subject {row.subject_key}")
        print(f"  state {row.state}  received {row.received_at:%Y-%m-%d %H:%M}  due {row.due_at:%Y-%m-%d}", end="")
        print(f" ({days_left(row)} days left)" if row.state in ("received", "running", "on_hold") else "")
        found = row.record.found_at_start
        if found is not None and not any(found.values()):
            print("  NOTHING FOUND: no store held data for this subject when the request began (is the id")
            print("  spelt exactly as stored? --user-hex gives it byte for byte); counts of 0 are not an erasure")
        if row.state == "failed" and row.record.failed_step:
            fence = {
                "lifted": "user fence lifted: the user's agent stores new data again; file a new request to "
                "erase what is left",
                "kept": "user fence KEPT (lifting it failed too): the user's agent refuses new data until "
                "a new request completes",
                "not_placed": "the user fence was never placed",
            }.get(row.record.fence_after_failure or "", "user fence state unknown")
            print(f"  failed at step {row.record.failed_step}; {fence}")
        if row.state == "failed" and row.record.failure_reason:
            print(f"  reason: {row.record.failure_reason}")
        current = await progress(client, args.request_id)
        if current is not None:
            print("\n".join(render(current)[1:]))
        print(f"Temporal UI: {ui_link(settings, row.request_id)}")
        return ExitCode.OK

    return asyncio.run(main())


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import days_left

    with platform_for(settings) as platform:
        rows = platform.requests.list_requests(args.status, args.limit)
    if args.json:
        print_json(
            [
                {
                    "request_id": row.request_id,
                    "state": row.state,
                    "app_name": row.app_name,
                    "subject_key": row.subject_key,
                    "received_at": row.received_at,
                    "due_at": row.due_at,
                    "days_left": days_left(row) if row.state in ACTIVE_STATES else None,
                }
                for row in rows
            ]
        )
        return ExitCode.OK
    for row in rows:
        due = f"due {row.due_at:%Y-%m-%d}"
        if row.state in ("received", "running", "on_hold"):
            due += f" ({days_left(row)}d left)"
        print(f"{row.request_id}  {row.state:<20} {row.app_name:<16} {row.subject_key}  {due}")
    if not rows:
        print("no requests" + (f" in state {args.status}" if args.status else ""))
    return ExitCode.OK


def _add_request(sub: Any) -> None:
    req = sub.add_parser("request", help="file an erasure request")
    req.add_argument("--app", required=True, help="the agent platform's app name the user's data is under")
    add_user_arguments(req)
    req.add_argument("--reason", help="why (e.g. the ticket of the data subject's request); kept with the request")
    req.add_argument("--requested-by", help="who files it (recorded; the subject key, never this, is in receipts)")
    req.add_argument("--due", help="due date YYYY-MM-DD (default: received + ERASURE_DUE_DAYS)")
    req.add_argument("--wait", action="store_true", help="follow progress until done (exit 0 only if completed)")
    add_json(req)
    req.set_defaults(handler=_request)


def _add_status(sub: Any) -> None:
    st = sub.add_parser("status", help="a request's state, progress and days left")
    st.add_argument("request_id", help="an erasure request id (er_...) or a forget request id (fr_...)")
    st.add_argument("--watch", action="store_true", help="follow a running request's progress until it is done")
    add_json(st)
    st.set_defaults(handler=_status)


def _add_list(sub: Any) -> None:
    ls = sub.add_parser("list", help="list requests, newest first")
    ls.add_argument("--status", choices=[*ACTIVE_STATES, *FINAL_STATES], help="only requests in this state")
    ls.add_argument("--limit", type=positive_int, default=50, help="at most this many (default 50)")
    add_json(ls)
    ls.set_defaults(handler=_list)


COMMANDS: dict[str, Adder] = {"request": _add_request, "status": _add_status, "list": _add_list}

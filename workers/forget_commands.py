"""``erasure forget`` and ``erasure unsuppress``: item forgetting for staff (a support or privacy officer).

``erasure forget --app A --user U --about "where I live"`` previews (changes nothing): the user's items the
description resolves to through the recall path, numbered, with why each matched, matching ``user:`` state,
summaries that go with them and warnings (several candidates; nothing is said of other users' items).
Acting needs ``--confirm`` and the chosen ids (``--memory``; with ``--about`` alone only
when exactly one item matched). ``--strength suppress`` hides instead (reversible with ``unsuppress``);
``--session SID --confirm`` erases one whole session.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from typing import Any

from workers.errors import ErasureCliError
from workers.settings import Settings


def _platform(settings: Settings) -> Any:
    from workers.wiring import build_platform

    return build_platform(settings)


def _print_preview(found: Any) -> None:
    if not found.candidates and not found.state_keys:
        print("Nothing stored matches.")
    for n, c in enumerate(found.candidates, start=1):
        hidden = "  (already hidden)" if c.hidden else ""
        print(f"  {n}. {c.memory_id}  {c.describe()}  [matched: {', '.join(c.matched)}]{hidden}")
    for s in found.state_keys:
        print(f"  state {s.key} = {s.value!r}")
    if found.derived:
        print(f"  {found.derived} summary row(s) drawn from these go with them (removed and listed)")
    for w in found.warnings:
        print(f"  note: {w}")


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    from workers.forget_service import file_forget, forget_result, preview
    from workers.service import exact_user_id
    from workers.temporal_client import connect

    user_id = exact_user_id(args.user, args.user_hex)
    if not (args.about or args.memory or args.session):
        raise ErasureCliError("say what to forget: --about TEXT, --memory ID ... or --session SID")
    if args.session and (args.about or args.memory):
        raise ErasureCliError("--session erases one whole session: give it alone")
    if args.session and args.strength:  # it used to switch to erase_session silently
        raise ErasureCliError("--session erases one whole session; --strength does not apply to it: leave it out")
    strength = "erase_session" if args.session else (args.strength or "forget")

    async def main() -> int:
        with _platform(settings) as platform:
            chosen = list(args.memory or [])
            state_keys: list[str] = list(args.state_key or [])
            spans: list[str] = list(args.span or [])
            if args.about:
                found = await asyncio.to_thread(preview, platform, args.app, user_id, args.about)
                print(f"'{args.about}' resolves to:")
                _print_preview(found)
                if not args.confirm:
                    print("Nothing changed. To act: add --confirm and the ids to forget (--memory ID ...).")
                    return 0
                if not chosen:
                    if len(found.candidates) != 1:
                        raise ErasureCliError(
                            f"{len(found.candidates)} items match: choose with --memory ID ... (nothing changed)"
                        )
                    chosen = [found.candidates[0].memory_id]
                unknown = set(chosen) - {c.memory_id for c in found.candidates}
                if unknown:
                    raise ErasureCliError(f"{len(unknown)} chosen id(s) are not in the preview (nothing changed)")
                if strength == "forget":
                    spans += found.spans(chosen)
            elif not args.confirm:
                raise ErasureCliError("without --about there is no preview: add --confirm to act (nothing changed)")
            client = await connect(settings)
            filed = await file_forget(
                client,
                platform,
                settings,
                app_name=args.app,
                user_id=user_id,
                strength=strength,
                memory_ids=chosen,
                spans=spans,
                state_keys=state_keys,
                session_id=args.session,
                about=args.about,
                requested_by=args.requested_by,
            )
        print(f"filed: {filed.request_id}  ({strength}; subject {filed.subject_key}; tombstone {filed.tombstone_id})")
        if not args.wait:
            return 0
        result = await forget_result(client, filed.request_id)
        counts = ", ".join(f"{k}={v}" for k, v in sorted(result.counts.items()))
        print(f"{result.status}: {counts}")
        for v in result.verifications:
            checks = ", ".join(f"{c.check} {'ok' if c.passed else 'FAILED'}" for c in v.checks)
            print(f"  verification {v.phase}: {'passed' if v.passed else 'FAILED'} ({checks})")
        print(f"receipt sha256 {result.receipt_sha256}")
        return 0 if result.status == "completed" else 1

    return asyncio.run(main())


def _unsuppress(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import exact_user_id, validate_request

    user_id = exact_user_id(args.user, args.user_hex)
    try:
        tombstone = str(uuid.UUID(args.tombstone))
    except ValueError:
        raise ErasureCliError("--tombstone must be a tombstone id (a UUID)") from None
    with _platform(settings) as platform:
        sk = validate_request(platform, args.app, user_id)
        lifted = platform.forgetting.lift(sk, tombstone)
    print("suppression lifted" if lifted else "no live suppression with that id for this user (nothing changed)")
    return 0 if lifted else 1


def register(sub: Any, add_user_arguments: Any) -> None:
    fg = sub.add_parser("forget", help="forget one thing of a user: preview, then suppress, forget or erase a session")
    fg.add_argument("--app", required=True, help="the app name the user's memory is under")
    add_user_arguments(fg)
    fg.add_argument("--about", help="a description, resolved through the recall path (previewed first)")
    fg.add_argument("--memory", nargs="+", metavar="ID", help="memory ids to act on (with --confirm)")
    fg.add_argument("--session", metavar="SID", help="erase this one session of the user (with --confirm)")
    fg.add_argument("--strength", choices=["suppress", "forget"], default=None, help="default: forget")
    fg.add_argument("--span", action="append", help="a phrase to block from being written again (repeatable)")
    fg.add_argument("--state-key", action="append", help="a user: state key to remove, e.g. user:default_city")
    fg.add_argument("--confirm", action="store_true", help="act (without it: preview only)")
    fg.add_argument("--wait", action="store_true", help="wait for the verified result and the receipt")
    fg.add_argument("--requested-by", default=None, help="who asked (sealed at rest)")
    fg.set_defaults(handler=_forget)
    un = sub.add_parser("unsuppress", help="lift a suppression (only suppressions can be lifted)")
    un.add_argument("--app", required=True, help="the app name the user's memory is under")
    add_user_arguments(un)
    un.add_argument("--tombstone", required=True, help="the suppression's tombstone id")
    un.set_defaults(handler=_unsuppress)

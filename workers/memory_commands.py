"""``erasure memory show`` and ``erasure memory retire-idle``: the memory lifecycle for staff.

``erasure memory show --app A --user U`` answers a data-subject access question: what is remembered about
the user, grouped by purpose, each row with its words, tier, why it is held (purpose, retention, expiry),
where it came from, its state, its confidence now and where it may be used; then the rows of others derived
from the user's rows (ids only) and the live forget tombstones (no text). ``--json`` writes the same as one
document (stable keys, ISO times) to stdout, or ``--out FILE`` (created owner-only). Reads only.

``erasure memory retire-idle --app A --idle-days N`` ingests each session idle for N days into memory, then
deletes its artifacts and the session (``stores.operations.session_retirement``); ``--dry-run`` counts only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import datetime, timedelta
from typing import Any

from workers.errors import ErasureCliError
from workers.settings import Settings


def _platform(settings: Settings) -> Any:
    from workers.wiring import build_platform

    return build_platform(settings)


# ----- show ----------------------------------------------------------------------------------------


def _when(value: datetime | None, never: str = "never") -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else never


def _print_row(m: Any) -> None:
    text = json.dumps(m.text, ensure_ascii=False) if m.text is not None else "(unreadable: the key is shredded)"
    hidden = "  [hidden by a forget tombstone]" if m.hidden else ""
    print(f"  {m.id}  {m.tier}/{m.kind}  {m.state}{hidden}")
    print(f"      text: {text}")
    expires = _when(m.expires_at, "never (until withdrawn)")
    print(f"      why:  {m.purpose}; retention {m.retention_class}; expires {expires}")
    derived = f"; derived from {', '.join(m.derived_from)}" if m.derived_from else ""
    print(f"      from: {m.source_kind} {m.source_ref or '-'}; {len(m.source_sessions)} source session(s){derived}")
    if m.superseded_by or m.supersedes or m.challenged_by:
        links = [f"superseded by {m.superseded_by}"] if m.superseded_by else []
        links += [f"supersedes {', '.join(m.supersedes)}"] if m.supersedes else []
        links += [f"challenged by {', '.join(m.challenged_by)}"] if m.challenged_by else []
        print(f"      links: {'; '.join(links)}")
    pinned = "pinned; " if m.pinned else ""
    print(
        f"      confidence {m.confidence_now:.2f} now ({m.confidence_basis}), use: {m.use}; {pinned}"
        f"importance {m.importance:.2f}; hits {m.hits}; last access {_when(m.last_accessed_at)}"
    )


def _print_view(view: Any) -> None:
    states = ", ".join(f"{n} {s}" for s, n in view.state_counts().items() if n)
    unreadable = f"; {view.unreadable} unreadable (key shredded)" if view.unreadable else ""
    print(f"Memory of this user in {view.app_name} (subject {view.subject_key}): {len(view.memories)} row(s)", end="")
    print(f" ({states}){unreadable}" if states else unreadable)
    if not view.memories:
        print("Nothing remembered.")
    for purpose, rows in view.by_purpose():
        print(f"\nPurpose: {purpose} ({len(rows)} row(s))")
        for m in rows:
            _print_row(m)
    ids = f": {', '.join(view.derived_by_others)}" if view.derived_by_others else ""
    print(f"\nRows of others derived from these: {len(view.derived_by_others)}{ids}")
    strengths = ", ".join(f"{s} {n}" for s, n in view.tombstone_strengths().items())
    print(f"Live forget tombstones: {len(view.tombstones)}" + (f" ({strengths})" if strengths else ""))


def _write_private(path: str, body: str) -> None:
    """The export holds the user's words: created readable by its owner only."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        raise ErasureCliError(f"cannot write --out file: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)


def _show(args: argparse.Namespace, settings: Settings) -> int:
    from stores.operations.memory_view import export, memory_view
    from workers.service import exact_user_id, validate_request

    user_id = exact_user_id(args.user, args.user_hex)
    with _platform(settings) as platform:
        sk = validate_request(platform, args.app, user_id)
        view = memory_view(platform, args.app, user_id, sk)
    if not (args.json or args.out):
        _print_view(view)
        return 0
    body = json.dumps(export(view), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    if args.out:
        _write_private(args.out, body)
        print(f"wrote {len(view.memories)} row(s) to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(body)
    return 0


# ----- retire-idle ---------------------------------------------------------------------------------


def _progress_line(counts: Any) -> str:
    verb = "would retire" if counts.dry_run else "retired"
    return (
        f"{counts.idle} idle: {verb} {counts.retired}, kept {counts.kept} "
        f"(held {counts.held}, fenced {counts.fenced}, invalid {counts.invalid}, active again {counts.active_again})"
    )


def _retire_idle(args: argparse.Namespace, settings: Settings) -> int:
    from stores.infra.errors import InvalidIdentifier
    from stores.operations.session_retirement import retire_idle_sessions
    from stores.privacy.identity import validate_app_name

    try:
        validate_app_name(args.app)
    except InvalidIdentifier as exc:
        raise ErasureCliError(str(exc)) from None
    if args.idle_days < 1:
        raise ErasureCliError("--idle-days must be at least 1")
    if args.limit < 1:
        raise ErasureCliError("--limit must be at least 1")
    live = sys.stdout.isatty()

    def show(counts: Any) -> None:
        if live:
            print(f"\r  {_progress_line(counts)}", end="", flush=True)
        elif counts.idle % 100 == 0:
            print(f"  {_progress_line(counts)}", flush=True)

    with _platform(settings) as platform:
        if not platform.requests.app_known(args.app):
            raise ErasureCliError(f"unknown app {args.app!r}: the platform holds no data for it")
        counts = asyncio.run(
            retire_idle_sessions(
                platform,
                args.app,
                timedelta(days=args.idle_days),
                dry_run=args.dry_run,
                limit=args.limit,
                progress=show,
            )
        )
    if live and counts.idle:
        print()
    print(("dry run (nothing changed): " if args.dry_run else "") + _progress_line(counts))
    if not args.dry_run:
        removed = counts.artifact_versions
        print(f"  {counts.events} event(s) ingested into memory, {removed} artifact version(s) deleted")
    return 0


def register(sub: Any, add_user_arguments: Any) -> None:
    mem = sub.add_parser("memory", help="what is remembered about a user; retire idle sessions into memory")
    mem_sub = mem.add_subparsers(dest="memory_command", required=True)

    show = mem_sub.add_parser("show", help="what is remembered about a user, by purpose, with provenance and state")
    show.add_argument("--app", required=True, help="the app name the user's memory is under")
    add_user_arguments(show)
    show.add_argument("--json", action="store_true", help="one JSON document (a machine-readable export)")
    show.add_argument("--out", metavar="FILE", help="write the JSON document to FILE (owner-only) instead of stdout")
    show.set_defaults(handler=_show)

    ret = mem_sub.add_parser(
        "retire-idle", help="ingest sessions idle for N days into memory, then delete them and their artifacts"
    )
    ret.add_argument("--app", required=True, help="the app whose idle sessions are retired")
    ret.add_argument("--idle-days", type=int, required=True, help="idle for longer than this many days")
    ret.add_argument("--dry-run", action="store_true", help="count only; change nothing")
    ret.add_argument("--limit", type=int, default=1000, help="at most this many idle sessions per run")
    ret.set_defaults(handler=_retire_idle)

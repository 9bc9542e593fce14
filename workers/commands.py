"""CLI subcommands beyond the stack (requests, status, holds, receipts, seeding, demo); the console's
(``serve``, ``token``, ``audit``) live in ``console.commands``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.errors import ErasureCliError
from workers.settings import Settings


def _platform(settings: Settings) -> Any:
    from workers.wiring import build_platform

    return build_platform(settings)


# ----- worker, migrate, seed -----------------------------------------------------------------------


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.local_secrets import load_secrets

    secrets = load_secrets(settings)
    if args.check:
        from workers import check

        return check.main(settings, secrets, as_json=args.json, deadline=args.deadline)

    from workers.credential_reload import TemporalCredentials
    from workers.temporal_client import connect
    from workers.versioning import deployment_config
    from workers.worker import run_worker

    deployment = deployment_config(settings)  # refused here, before anything connects

    async def main() -> None:
        client = await connect(settings, secrets, metrics_port=settings.metrics_port_int)
        credentials = TemporalCredentials(settings, secrets, client, metrics_port=settings.metrics_port_int)
        with _platform(settings) as platform:
            await run_worker(
                client,
                settings.task_queue,
                platform,
                secrets.signing_key,
                settings.chaos_pause_seconds,
                credentials=credentials,
                deployment=deployment,
                physical_task_queue=settings.physical_task_queue,
            )

    asyncio.run(main())
    return 0


def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    from stores.operations.database import prepare_database

    applied = prepare_database(settings.postgres_url)
    print(f"migrations: {'applied ' + ', '.join(map(str, applied)) if applied else 'up to date'}")
    with _platform(settings) as platform:
        rekeyed = platform.ledger.rekey_legacy()
    if rekeyed:
        print(f"session tombstones re-keyed (session ids hashed and sealed): {rekeyed}")
    return 0


def _seed(args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack.seeding.seeder import seed_platform, user_ids

    users = user_ids(args.users, args.seed, args.prefix)
    with _platform(settings) as platform:
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


# ----- requests ------------------------------------------------------------------------------------


async def _follow(client: Any, request_id: str, interval: float = 0.5) -> str:
    from workers.progress_view import LiveDisplay, render
    from workers.service import progress

    display = LiveDisplay()
    while True:
        current = await progress(client, request_id)
        if current is not None:
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


def _request(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import exact_user_id, file_request, ui_link
    from workers.temporal_client import connect

    user_id = exact_user_id(args.user, args.user_hex)

    async def main() -> int:
        with _platform(settings) as platform:
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
        verb = "attached to the running request" if filed.attached else "filed"
        print(f"{verb}: {filed.request_id}  (subject {filed.subject_key}, due {filed.due_at:%Y-%m-%d})")
        print(f"Temporal UI: {ui_link(settings, filed.request_id)}")
        if args.wait:
            status = await _follow(client, filed.request_id)
            return 0 if status == "completed" else 1
        return 0

    return asyncio.run(main())


def _forget_status(request_id: str, settings: Settings) -> int:
    """``erasure status fr_...``: a forget filed without ``--wait`` can be followed (it said no such request)."""
    from stores.infra.errors import RequestNotFound

    with _platform(settings) as platform:
        try:
            row = platform.forget_requests.get(request_id)
        except RequestNotFound:
            raise ErasureCliError(f"no forget request {request_id}") from None
    print(f"forget {row.request_id}  app {row.app_name}  subject {row.subject_key}  strength {row.strength}")
    print(f"  state {row.state}  received {row.received_at:%Y-%m-%d %H:%M}  items {len(row.memory_ids)}")
    if row.outcome:
        print("  " + ", ".join(f"{k}={v}" for k, v in sorted(row.outcome.items())))
    return 0 if row.state in ("completed", "received", "running", "pending_approval") else 1


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from workers.progress_view import render
    from workers.service import days_left, progress, ui_link
    from workers.temporal_client import connect

    if args.request_id.startswith("fr_"):  # a forget: its own store and workflow
        return _forget_status(args.request_id, settings)

    async def main() -> int:
        with _platform(settings) as platform:
            row = platform.requests.get(args.request_id)
        client = await connect(settings)
        if args.watch and row.state in ("received", "running", "on_hold"):
            status = await _follow(client, args.request_id)
            return 0 if status == "completed" else 1
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
        current = await progress(client, args.request_id)
        if current is not None:
            print("\n".join(render(current)[1:]))
        print(f"Temporal UI: {ui_link(settings, row.request_id)}")
        return 0

    return asyncio.run(main())


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import days_left

    with _platform(settings) as platform:
        rows = platform.requests.list_requests(args.status, args.limit)
    for row in rows:
        due = f"due {row.due_at:%Y-%m-%d}"
        if row.state in ("received", "running", "on_hold"):
            due += f" ({days_left(row)}d left)"
        print(f"{row.request_id}  {row.state:<20} {row.app_name:<16} {row.subject_key}  {due}")
    if not rows:
        print("no requests")
    return 0


def _hold(args: argparse.Namespace, settings: Settings, place: bool) -> int:
    """Record the hold change in the hold store (what every saga reads), then tell the running request.

    The store is the authority: a running saga reads it right before every destructive step, so a hold
    placed here is honoured even when the signal cannot be delivered. The output says which happened.
    """
    from workers.service import HoldNotDelivered, signal_hold_change, validate_request
    from workers.temporal_client import connect
    from workflows.erasure import HOLD_RECHECK_MAX

    async def main() -> int:
        with _platform(settings) as platform:
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
        if not changed:
            print(f"no change: a hold was {'already placed' if place else 'not in place'} for {subject}")
            return 1
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
        return 0

    return asyncio.run(main())


# ----- receipts ------------------------------------------------------------------------------------


def _public_key(settings: Settings) -> Any:
    from verifier.receipts.signing import signing_key
    from workers.local_secrets import load_secrets

    return signing_key(load_secrets(settings).signing_key).public_key()


def _receipt_show(args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.attestation import attestation_bytes, load_attestation, read_physical
    from verifier.receipts.issuing import load_receipt
    from verifier.receipts.signing import document_bytes

    with _platform(settings) as platform:
        document = load_receipt(platform, args.request_id)
        body = document["receipt"] if document is not None else None
        if args.physical:  # the second document: the platform's physical attestation (issue 30)
            attestation = load_attestation(platform.pool, args.request_id)
            if attestation is None:
                now = read_physical(platform.pool, args.request_id, body).line()
                raise ErasureCliError(f"no physical attestation for request {args.request_id} (yet): physical: {now}")
            sys.stdout.write(attestation_bytes(attestation).decode())
            return 0
        physical = read_physical(platform.pool, args.request_id, body) if body is not None else None
    if document is None or body is None or physical is None:
        raise ErasureCliError(f"no receipt for request {args.request_id} (yet)")
    if args.json:
        sys.stdout.write(document_bytes(document).decode())
        return 0
    print(f"receipt {body['request_id']}  {body['status']}  subject {body['subject_key']}")
    print(f"  received {body['received_at']}  completed {body['completed_at']}  due met: {body.get('due_met', '-')}")
    for step in body.get("steps", []):
        counts = ", ".join(f"{k}={v}" for k, v in sorted(step["counts"].items()) if v)
        print(f"  {step['name']:<14} {step['state']:<8} {counts}")
    from workers.progress_view import render_verifications

    print("\n".join(render_verifications(body)))
    print(f"  derived rows to regenerate: {len(body['derived_rows_removed'])}")
    print(f"  physical: {physical.line()}")
    print(f"  signature: {document['signature']['alg']} key {document['signature']['key_id']}")
    return 0


def _receipt_verify(args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.signing import ATTESTATION_SCHEMA_ID, InvalidReceipt, load_public_key, verify_bytes

    key = load_public_key(Path(args.public_key).read_bytes()) if args.public_key else _public_key(settings)
    try:
        body = verify_bytes(_read(args.file), key)
    except InvalidReceipt as exc:
        print(f"INVALID: {exc}")
        return 1
    attestation = body.get("schema") == ATTESTATION_SCHEMA_ID
    if args.receipt:  # the attestation's link to its receipt: same request, the receipt's SHA-256
        if not attestation:
            raise ErasureCliError("--receipt goes with a physical attestation: give the attestation as FILE")
        from verifier.receipts.attestation import link_problem

        try:
            receipt = verify_bytes(_read(args.receipt), key)
        except InvalidReceipt as exc:
            print(f"INVALID: the receipt {args.receipt}: {exc}")
            return 1
        problem = link_problem(body, receipt)
        if problem:
            print(f"NOT LINKED: {problem}")
            return 1
    noun = "" if attestation else "receipt "  # an attestation's verdict names it
    done, what = receipt_verdict(body)
    if done or args.any_status:
        linked = f", linked to the receipt {args.receipt}" if args.receipt else ""
        print(f"valid: {noun}{body['request_id']} ({what}) signed by this key{linked}")
        return 0
    print(f"signature valid, but {noun}{body['request_id']} is {what}")
    return 1


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ErasureCliError(f"cannot read {path}: {exc.strerror}") from None


def receipt_verdict(body: dict[str, Any]) -> tuple[bool, str]:
    """Whether a verified receipt proves a completed deletion, and what it is in words. A suppression hides
    items from recall and deletes nothing: never reported as a completed erasure (it was, with exit 0). A
    physical attestation proves the physical clean-up when it names stores and every one is covered by a
    run that started after the request's last deletion."""
    from verifier.receipts.signing import ATTESTATION_SCHEMA_ID

    if body.get("schema") == ATTESTATION_SCHEMA_ID:
        return _attestation_verdict(body)
    status = str(body.get("status"))
    if body.get("strength") == "suppress":
        return False, f"a suppression ({status}): items hidden from recall, nothing deleted"
    if status != "completed":
        return False, f"{status}: the erasure was not completed"
    outcome = str(body.get("outcome", ""))
    if outcome.startswith("nothing_found"):
        return True, "completed: nothing found, the platform held no data for this id; nothing erased"
    return True, "completed"


def _attestation_verdict(body: dict[str, Any]) -> tuple[bool, str]:
    run = body.get("run")
    run_id = run.get("id") if isinstance(run, dict) else None
    stores = body.get("stores")
    stores = stores if isinstance(stores, list) else []
    missing = [str(s.get("store")) for s in stores if not (isinstance(s, dict) and s.get("covered") is True)]
    if not stores:  # fail closed: an attestation that names no store proves nothing
        return False, f"a physical attestation that names no store (run {run_id})"
    if missing:
        return False, f"a physical attestation with stores not covered: {', '.join(missing)} (run {run_id})"
    if body.get("run_after_last_deletion") is not True:
        return False, f"a physical attestation whose run {run_id} did not start after the last deletion"
    late = "" if body.get("within_window") is not False else f"; late: after its window (due {body.get('due_at')})"
    return True, f"physical attestation: every store covered, run {run_id}{late}"


def _receipt_public_key(_args: argparse.Namespace, settings: Settings) -> int:
    from verifier.receipts.signing import public_key_pem

    sys.stdout.write(public_key_pem(_public_key(settings)))
    return 0


def _reverify(args: argparse.Namespace, settings: Settings) -> int:
    from workers.service import reverify_input
    from workers.temporal_client import connect
    from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyResult

    if args.request_id.startswith("fr_"):  # a forget: its own store and workflow
        return _forget_status(args.request_id, settings)

    async def main() -> int:
        with _platform(settings) as platform:
            row = platform.requests.get(args.request_id)
        client = await connect(settings)
        import uuid

        result = await client.execute_workflow(
            VERIFIER_WORKFLOW,
            reverify_input(row),
            id=f"reverify-{row.request_id}-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=VerifyResult,
        )
        for check in result.checks:
            print(f"  {'ok ' if check.passed else 'BAD'} {check.check:<14} {check.detail}")
        print("verification passed" if result.passed else "verification FAILED")
        return 0 if result.passed else 1

    return asyncio.run(main())


def _demo(_args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    return run_demo(settings)


def _codec_server(args: argparse.Namespace, settings: Settings) -> int:
    from workers.codec_server import serve

    serve(settings, args.port)
    return 0


def _replay_tombstones(_args: argparse.Namespace, settings: Settings) -> int:
    from stores.operations.lifecycle_replay import replay_lifecycle
    from stores.operations.restore import replay_tombstones

    with _platform(settings) as platform:
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
        return 0

    return asyncio.run(main())


def _reseal_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from workers.reseal_command import run

    return run(args, settings)


def add_user_arguments(parser: argparse.ArgumentParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="the user id exactly as the platform stores it")
    who.add_argument(
        "--user-hex", help="the user id's UTF-8 bytes in hex, for ids a shell would trim or mangle (spaces, NBSP)"
    )


def register(sub: Any, console_commands: Callable[[Any], None] | None = None) -> None:
    from workers.schedule import BY_NAME

    """Add the erasure subcommands to the ``erasure`` parser; ``console_commands`` (the CLI's composition root
    passes ``console.commands.register``) adds the console's in their place among them."""
    worker = sub.add_parser("worker", help="run the worker (all workflows and activities)")
    worker.add_argument(
        "--check",
        action="store_true",
        help="instead of running: check Postgres (schema), Temporal (namespace, search attributes), the KMS key "
        "and the buckets, one line each; exit 0 when all are ready, 1 if not",
    )
    worker.add_argument("--json", action="store_true", help="with --check: one JSON document instead of lines")
    worker.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="with --check: seconds the whole check may take; parts not answering by then are reported (30)",
    )
    worker.set_defaults(handler=_worker)
    sub.add_parser("migrate", help="create google-adk's tables if missing and apply migrations").set_defaults(
        handler=_migrate
    )

    seed = sub.add_parser(
        "seed", help="fill the stores with synthetic users through the real services (development only)"
    )
    seed.add_argument("--users", type=int, default=5)
    seed.add_argument("--size", choices=["small", "typical", "large"], default="typical")
    seed.add_argument("--seed", type=int, default=1)
    seed.add_argument("--app", default="support-agent")
    seed.add_argument("--prefix", default="user", help="user id prefix (ids are PREFIX-SEED-NNNN@example.org)")
    seed.set_defaults(handler=_seed)

    req = sub.add_parser("request", help="file an erasure request")
    req.add_argument("--app", required=True)
    add_user_arguments(req)
    req.add_argument("--reason")
    req.add_argument("--requested-by")
    req.add_argument("--due", help="due date YYYY-MM-DD (default: received + ERASURE_DUE_DAYS)")
    req.add_argument("--wait", action="store_true", help="follow progress until done")
    req.set_defaults(handler=_request)

    st = sub.add_parser("status", help="a request's state, progress and days left")
    st.add_argument("request_id")
    st.add_argument("--watch", action="store_true")
    st.set_defaults(handler=_status)

    ls = sub.add_parser("list", help="list requests")
    ls.add_argument("--status")
    ls.add_argument("--limit", type=int, default=50)
    ls.set_defaults(handler=_list)

    for name, place in (("hold", True), ("release", False)):
        hp = sub.add_parser(name, help=f"{'place' if place else 'release'} a legal hold for a subject")
        hp.add_argument("--app", required=True)
        hp.add_argument("--user", required=True)
        hp.add_argument("--reason", required=True)
        hp.add_argument("--by", help="who decided")
        hp.set_defaults(handler=lambda a, s, place=place: _hold(a, s, place))

    rc = sub.add_parser("receipt", help="show, verify or get the key of signed receipts")
    rc_sub = rc.add_subparsers(dest="receipt_command", required=True)
    show = rc_sub.add_parser("show")
    show.add_argument("request_id")
    show.add_argument("--json", action="store_true", help="print the signed receipt document")
    show.add_argument(
        "--physical",
        action="store_true",
        help="print the signed physical attestation document instead (an error while physical is pending)",
    )
    show.set_defaults(handler=_receipt_show)
    ver = rc_sub.add_parser(
        "verify",
        help="exit 0 if the signature is valid and the erasure completed (a physical attestation: every store "
        "covered), 1 if not (with the reason)",
    )
    ver.add_argument("file", help="a receipt or a physical attestation (JSON)")
    ver.add_argument(
        "--receipt",
        metavar="FILE",
        help="with an attestation: check it is linked to this receipt (same request id, the receipt's SHA-256)",
    )
    ver.add_argument(
        "--any-status", action="store_true", help="exit 0 for any validly signed receipt, whatever its status"
    )
    ver.add_argument("--public-key", help="PEM file (default: this deployment's key)")
    ver.set_defaults(handler=_receipt_verify)
    rc_sub.add_parser("public-key", help="print the receipt signing public key (PEM)").set_defaults(
        handler=_receipt_public_key
    )

    rv = sub.add_parser("verify", help="re-run the verifier on a request (changes nothing)")
    rv.add_argument("request_id")
    rv.set_defaults(handler=_reverify)

    demo = sub.add_parser("demo", help="run a real erasure end to end on the local stack (development only)")
    demo.set_defaults(handler=_demo)

    sub.add_parser(
        "replay-tombstones",
        help="after restoring a backup: re-apply every erasure and memory lifecycle transition before data goes live",
    ).set_defaults(handler=_replay_tombstones)

    sc = sub.add_parser(
        "schedule",
        help="manage the scheduled jobs (late writers, retention expiry, key epochs, physical clean-up, reconciler)",
    )
    sc.add_argument("schedule_command", choices=["install", "list", "pause", "resume", "trigger"])
    sc.add_argument(
        "--sweep",
        choices=sorted(BY_NAME),
        default="late-writer",
        help="which schedule pause/resume/trigger act on (install and list cover all of them)",
    )
    sc.set_defaults(handler=_schedule)

    rs = sub.add_parser("reseal-sessions", help="seal google-adk session rows written before sealing (resumable)")
    rs.add_argument("--page-size", type=int, default=200)
    rs.add_argument("--pages-per-run", type=int, default=100, help="pages per workflow run (then continue-as-new)")
    rs.add_argument("--no-wait", action="store_true", help="start it and return (progress: run it again)")
    rs.set_defaults(handler=_reseal_sessions)

    if console_commands is not None:  # serve, token, audit: the console's own (console.commands)
        console_commands(sub)

    cs = sub.add_parser("codec-server", help="serve the payload codec so Temporal UI can decode payloads")
    cs.add_argument("--port", type=int, default=8081)
    cs.set_defaults(handler=_codec_server)

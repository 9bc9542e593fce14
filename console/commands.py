"""The console's commands of the ``erasure`` CLI: ``serve`` (the compliance API and pages), ``token``
(create, list, revoke API tokens) and ``audit verify`` (the audit log's hash chain).

Registered by the CLI's composition root (``workers.cli``); the console's modules are imported when a
command runs, so the other commands start without loading the web stack.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from workers.errors import ErasureCliError
from workers.settings import Settings


def _platform(settings: Settings) -> Any:
    from workers.wiring import build_platform

    return build_platform(settings)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from console.app import create_app
    from console.wiring import build_console
    from workers.credential_reload import TemporalCredentials
    from workers.local_secrets import load_secrets
    from workers.temporal_client import connect
    from workers.wiring import build_platform, console_settings

    settings = console_settings(settings)  # the console's own database login, not the owner's

    async def main() -> None:
        secrets = load_secrets(settings)
        with build_platform(settings, secrets) as platform:
            check_login(settings)
            client = await connect(settings, secrets)
            console = build_console(settings, secrets, platform, client)
            app = create_app(console)
            # the Temporal credentials kept fresh: a renewed certificate, API key file or OAuth token
            credentials, stop = TemporalCredentials(settings, secrets, client), asyncio.Event()
            fresh = asyncio.create_task(
                credentials.watch(None, stop, on_client=lambda new: setattr(console, "client", new))
            )
            print(f"compliance API on http://{args.host}:{settings.serve_port} (OpenAPI at /openapi.json)")
            if settings.console_metrics_port:
                from console.telemetry import serve_metrics

                serve_metrics(console.metrics, args.host, settings.console_metrics_port)
                print(f"Prometheus metrics on http://{args.host}:{settings.console_metrics_port}/metrics")
            try:
                await uvicorn.Server(serve_config(app, args.host, settings)).serve()
            finally:
                stop.set()
                await fresh

    asyncio.run(main())
    return 0


def check_login(settings: Settings) -> None:
    """Before serving: refuse (in production) or warn (locally) when the console's login (``settings``' database
    URL) could alter the audit log; a login that cannot connect is one line naming what to do (the URL is not
    shown: it may hold a password)."""
    import sys

    import psycopg

    from console.database_login import login_problem

    try:
        with psycopg.connect(settings.postgres_url, connect_timeout=10, autocommit=True) as conn:
            problem = login_problem(conn)
    except psycopg.ProgrammingError:  # libpq quotes a malformed URL whole in its message, password and all
        raise ErasureCliError("the console's database URL is malformed (not shown: it may hold a password)") from None
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise ErasureCliError(
            "the console cannot connect with its database login (ERASURE_CONSOLE_DATABASE_URL; locally "
            f"'erasure stack up' creates erasure_console): {reason}"
        ) from None
    if problem is None:
        return
    if settings.production:
        raise ErasureCliError(f"{problem}; grant erasure_console_rights to a login of its own (docs/operations.md)")
    print(f"warning: {problem} (locally allowed; production refuses it)", file=sys.stderr)


def serve_config(app: Any, host: str, settings: Settings) -> Any:
    """The uvicorn configuration ``erasure serve`` runs the console with. uvicorn's own proxy handling stays off
    (by default it believes ``X-Forwarded-For`` from 127.0.0.1, so a client there chose its own address): the
    console's ``TrustedProxies`` is the one place the headers are read, from the proxies
    ``ERASURE_CONSOLE_TRUSTED_PROXIES`` names, whatever ``FORWARDED_ALLOW_IPS`` says."""
    import uvicorn

    return uvicorn.Config(
        app, host=host, port=settings.serve_port, log_level="warning", proxy_headers=False, forwarded_allow_ips=[]
    )


def _token_create(args: argparse.Namespace, settings: Settings) -> int:
    from console.audit import AuditLog
    from console.tokens import TokenError, TokenStore

    with _platform(settings) as platform:
        try:
            info, token = TokenStore(platform.pool, settings.api_token_lifetime_days).create(
                args.name, args.role, args.by
            )
        except TokenError as exc:
            raise ErasureCliError(str(exc)) from None
        AuditLog.of(platform).append(args.by, "token_created", None, {"token_id": info.token_id, "roles": info.roles})
    print(f"token {info.token_id} ({', '.join(info.roles)}): {token}")
    print("shown once: it is stored hashed")
    return 0


def _token_list(_args: argparse.Namespace, settings: Settings) -> int:
    from console.tokens import TokenStore

    with _platform(settings) as platform:
        for t in TokenStore(platform.pool).list():
            state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else f"expires {t.expires_at:%Y-%m-%d}"
            print(f"{t.token_id}  {t.name:<24} {','.join(t.roles):<28} {state}  by {t.created_by}")
    return 0


def _token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from console.audit import AuditLog
    from console.tokens import TokenError, TokenStore

    with _platform(settings) as platform:
        try:
            TokenStore(platform.pool).revoke(args.token_id)
        except TokenError as exc:
            raise ErasureCliError(str(exc)) from None
        AuditLog.of(platform).append(args.by, "token_revoked", None, {"token_id": args.token_id})
    print(f"token {args.token_id} revoked")
    return 0


def _audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    from console.audit import AuditLog

    with _platform(settings) as platform:
        check = AuditLog.of(platform).verify(args.head)
    if check.ok:
        print(f"audit log intact: {check.entries} entries, head {check.head}")
        return 0
    where = f" at entry {check.first_bad_seq}" if check.first_bad_seq is not None else ""
    print(f"audit log BROKEN{where}: {check.why} ({check.entries} entries verified before it)")
    return 4


def register(sub: Any) -> None:
    """Add ``serve``, ``token`` and ``audit`` to the ``erasure`` parser."""
    sv = sub.add_parser("serve", help="serve the compliance API (OIDC or API-token authentication, roles, approval)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 in a pod)")
    sv.set_defaults(handler=_serve)

    tk = sub.add_parser("token", help="create, list or revoke API tokens of the compliance API")
    tk_sub = tk.add_subparsers(dest="token_command", required=True)
    tc = tk_sub.add_parser("create", help="a new token (printed once; stored hashed)")
    tc.add_argument("--name", required=True, help="what the token is for (shown on the tokens page)")
    tc.add_argument(
        "--role", action="append", required=True, help="its one role: requester, approver, auditor or admin"
    )
    tc.add_argument("--by", required=True, help="who creates it (recorded in the audit log)")
    tc.set_defaults(handler=_token_create)
    tk_sub.add_parser("list", help="every token, revoked ones too").set_defaults(handler=_token_list)
    tr = tk_sub.add_parser("revoke", help="revoke a token by its id")
    tr.add_argument("token_id", help="the token's id (erasure token list)")
    tr.add_argument("--by", required=True, help="who revokes it (recorded in the audit log)")
    tr.set_defaults(handler=_token_revoke)

    au = sub.add_parser("audit", help="the audit log of the compliance API")
    au_sub = au.add_subparsers(dest="audit_command", required=True)
    av = au_sub.add_parser("verify", help="check the hash chain of the whole audit log")
    av.add_argument("--head", help="a head hash noted earlier: also catches entries removed from the end")
    av.set_defaults(handler=_audit_verify)

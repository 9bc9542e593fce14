"""``erasure serve``: the compliance console's app (FastAPI, served by uvicorn), assembled from its routers.

Every route declares the permission it needs (``console.dependencies``); a route without one is refused by
the deny-by-default check at start (``assert_every_route_guarded``), so a new route cannot be public by
mistake. Callers authenticate with an OIDC bearer JWT (``console.oidc``) or an API token
(``console.tokens``); people on the pages with a login (``console.login``). Roles, from the token's roles
claim:

============  ==========================================================================================
requester     file requests; read and cancel their own
approver      read every request and receipt; approve (not their own), deny, cancel, extend the due date
auditor       read every request, receipt and the audit log
admin         API tokens and legal holds; read the audit log
============  ==========================================================================================

The console's modules, one way only (a router imports shared modules, never another router):

- shared: ``context`` (``Console``, ``console_of``), ``permissions`` (who may do what, deny by default),
  ``dependencies`` (the guards), ``rendering`` (templates, CSRF), ``erasure_requests`` and
  ``forget_requests`` (the actions the API and the pages share), ``audit_export``, and the stores and
  verifiers (``audit``, ``tokens``, ``sessions``, ``oidc``, ``identity``, ``intake``, ``readiness``,
  ``telemetry``, ``http_guards``);
- routers: ``health``, ``requests_api``, ``audit_api``, ``holds_api``, ``tokens_api``, ``forget_api``,
  ``temporal_ui`` (the codec and the Temporal UI proxy), ``forget_pages``, ``login``, ``pages``,
  ``receipt_pages`` (the receipt's certificate, its PDF and the signed files: ``certificate``,
  ``certificate_pdf``);
- ``app`` assembles them; ``wiring`` builds the ``Console`` from settings; ``commands`` holds the CLI's
  ``serve``, ``token`` and ``audit`` commands.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.middleware.sessions import SessionMiddleware

from console import (
    audit_api,
    forget_api,
    forget_pages,
    health,
    holds_api,
    pages,
    receipt_pages,
    requests_api,
    tokens_api,
)
from console.context import Console
from console.dependencies import LoginRequired, require
from console.http_guards import (
    COSTLY,
    BodyLimit,
    PrincipalLimits,
    RateLimit,
    SecurityHeaders,
    TrustedProxies,
    parse_networks,
)
from console.login import login_router, to_login
from console.permissions import GUARD_MARK, PERMISSIONS, PUBLIC_PATHS, assert_every_route_guarded, route_permission
from console.preview_guard import preview_guard_for
from console.rate_limits import shared_limits
from console.sessions import SESSION_COOKIE
from console.telemetry import Telemetry
from console.temporal_ui import CodecOrigins, codec_router, proxy_router
from stores.privacy.identity import derived_key

__all__ = [
    "PERMISSIONS",
    "PUBLIC_PATHS",
    "Console",
    "assert_every_route_guarded",
    "create_app",
    "require",
    "route_permission",
]


def create_app(console: Console) -> FastAPI:
    app = FastAPI(
        title="Erasure orchestrator: compliance API",
        version="1",
        description="File, approve and prove erasure requests. Every route needs a bearer token (OIDC JWT or "
        "API token) and a role; see docs/console.md.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.console = console
    shared = shared_limits(console.platform.pool, console.actor_secret)  # one budget for every console process
    app.state.preview_guard = preview_guard_for(console, shared)
    settings = console.settings
    rates = {"preview": settings.console_preview_per_minute}
    limits = PrincipalLimits(
        shared, {**dict.fromkeys(("filing", "search", "export"), settings.console_costly_per_minute), **rates}
    )
    for api in (health, requests_api, audit_api, holds_api, tokens_api, forget_api):
        mount(app, api.router, limits)
    if console.codec is not None:
        mount(app, codec_router(console.codec), limits)
    if console.oidc is not None and console.oidc_client_id:
        app.add_exception_handler(LoginRequired, to_login)
        mount(app, forget_pages.router, limits)
        mount(app, login_router(console.oidc_client_id, console.login_redirect_uri), limits)
        mount(app, pages.router, limits)
        mount(app, receipt_pages.router, limits)
        if console.temporal_ui_upstream:
            mount(app, proxy_router(console.temporal_ui_upstream, console.temporal_ui_token), limits)
        app.add_middleware(
            SessionMiddleware,
            secret_key=derived_key(console.actor_secret, "console-session").hex(),
            session_cookie=SESSION_COOKIE,
            same_site="none" if console.cross_site_cookie else "lax",
            https_only=console.cross_site_cookie or console.public_url.startswith("https://"),
            max_age=8 * 3600,
        )
    app.add_middleware(CodecOrigins, allowed=console.codec_origins)
    # outermost last: headers on every answer, then the rate and the size checked before anything else runs
    app.add_middleware(SecurityHeaders)
    app.add_middleware(RateLimit, limits=shared, per_minute=settings.console_rate_per_minute)
    app.add_middleware(BodyLimit)
    app.add_middleware(Telemetry, metrics=console.metrics)  # every answer counted, 429 and 413 too
    # outermost: who the client is, before anything keys on it (the trusted proxies' word, else the peer)
    app.add_middleware(TrustedProxies, trusted=parse_networks(settings.console_trusted_proxies))
    assert_every_route_guarded(app)
    return app


def mount(app: FastAPI, router: APIRouter, limits: PrincipalLimits | None = None) -> None:
    """``router``'s routes added to the app itself, each as its own route, as ``include_router`` did before
    FastAPI kept an included router as one nested entry of ``app.routes``: the deny-by-default check
    (``assert_every_route_guarded``) and every walk over the routes then see each route and its guard. A
    costly route (``COSTLY``) also gets its per-principal limit, drawn after its guard admits the caller."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"{route!r}: a console router holds API routes only")
        dependencies = list(route.dependencies)
        kinds = {COSTLY[(m, route.path)] for m in route.methods or () if (m, route.path) in COSTLY}
        if limits is not None and kinds:
            guard = next((d.call for d in route.dependant.dependencies if getattr(d.call, GUARD_MARK, None)), None)
            if guard is None:
                raise RuntimeError(f"route {route.path} is costly and declares no permission to limit by")
            dependencies += [Depends(limits.dependency(kind, guard)) for kind in sorted(kinds)]
        app.router.add_api_route(
            route.path,
            route.endpoint,
            response_model=route.response_model,
            status_code=route.status_code,
            tags=route.tags,
            dependencies=dependencies,
            summary=route.summary,
            description=route.description,
            response_description=route.response_description,
            responses=route.responses,
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_include=route.response_model_include,
            response_model_exclude=route.response_model_exclude,
            response_model_by_alias=route.response_model_by_alias,
            response_model_exclude_unset=route.response_model_exclude_unset,
            response_model_exclude_defaults=route.response_model_exclude_defaults,
            response_model_exclude_none=route.response_model_exclude_none,
            include_in_schema=route.include_in_schema,
            response_class=route.response_class,
            name=route.name,
            route_class_override=type(route),
            callbacks=route.callbacks,
            openapi_extra=route.openapi_extra,
            generate_unique_id_function=route.generate_unique_id_function,
        )
    app.router.on_startup.extend(router.on_startup)
    app.router.on_shutdown.extend(router.on_shutdown)

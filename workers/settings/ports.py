"""The local stack's ports: which setting claims which ports, and the check that no two claim the same one.

Most parts of ``erasure stack up`` listen on the one port their setting names, but SeaweedFS takes a block:
``ERASURE_S3_PORT`` and the seven after it (master, volume and filer with their gRPC ports, and the S3
gateway's gRPC port: ``workers.stack.parts.S3Part``). A block overlapping another setting's port used to start
one part and fail the next with "already in use by another program", when the other program was the stack
itself; the settings are now refused when built, with both settings and the port named.

Only the ports of what runs locally are claimed: a part pointed elsewhere (``ERASURE_S3_ENDPOINT`` and the
like) listens on nothing here, and production mode runs no local stack at all (its worker and console are
processes of their own, each in its pod or container).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workers.settings.names import var

if TYPE_CHECKING:
    from workers.settings.accessors import Accessors

#: SeaweedFS's ports: ``ERASURE_S3_PORT`` and the ones after it (``workers.stack.parts.S3Part`` lays them out)
S3_PORT_BLOCK = 8


def claimed_ports(settings: Accessors) -> dict[str, range]:
    """Variable -> the ports the local stack listens on because of it (empty in production mode)."""
    if settings.production:
        return {}
    claims: dict[str, range] = {}

    def claim(field: str, size: int = 1) -> None:
        port = int(getattr(settings, field))
        if port:  # 0: off (the metrics ports)
            claims[var(field)] = range(port, port + size)

    if settings.embedded_temporal:
        claim("temporal_port")
        claim("temporal_ui_port")
    if settings.embedded_postgres:
        claim("pg_port")
    if settings.embedded_s3:
        claim("s3_port", S3_PORT_BLOCK)
    if settings.embedded_kms:
        claim("kms_port")
    if settings.embedded_cache and settings.response_cache_url is not None:
        claim("cache_port")
    if not settings.oidc_issuer:  # the local identity provider (``workers.stack.app_parts``)
        claim("idp_port")
    claim("serve_port")
    claim("metrics_port")
    claim("console_metrics_port")
    return claims


def _said(name: str, ports: range) -> str:
    if len(ports) == 1:
        return f"{name} ({ports.start})"
    return f"{name} ({ports.start}, with the {len(ports) - 1} after it: {ports.start}-{ports.stop - 1})"


def overlap_problem(claims: dict[str, range]) -> str | None:
    """One line naming every two settings that claim one port, with the first port they share; ``None``: no
    two do."""
    owner: dict[int, str] = {}
    shared: dict[tuple[str, str], int] = {}
    for name, ports in claims.items():
        for port in ports:
            first = owner.setdefault(port, name)
            if first != name:
                shared.setdefault((first, name), port)
    if not shared:
        return None
    said = [
        f"{_said(a, claims[a])} and {_said(b, claims[b])} both claim port {port}"
        for (a, b), port in sorted(shared.items(), key=lambda kv: kv[1])
    ]
    return "; ".join(said) + ": the local stack needs each port once; choose ports apart"

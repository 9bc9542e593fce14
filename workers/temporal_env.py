"""The standard ``TEMPORAL_*`` client configuration, read through ``temporalio.envconfig``.

``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS`` and
``TEMPORAL_TLS_*_PATH`` / ``TEMPORAL_TLS_SERVER_NAME``, and a profile of a TOML file (``TEMPORAL_CONFIG_FILE``,
``TEMPORAL_PROFILE``), are what the Temporal CLI and SDKs read. Each fills the ``ERASURE_TEMPORAL_*`` setting
it matches when that setting is unset; both set to different values is refused, naming both. The default
file (``~/.config/temporalio/temporal.toml``) is read only when ``TEMPORAL_CONFIG_FILE`` or
``TEMPORAL_PROFILE`` is set: a developer's CLI profile must not silently point the local stack elsewhere.

What the settings cannot carry is refused rather than ignored: certificates and keys given inline
(``*_DATA``; give them as files) and gRPC headers (``TEMPORAL_GRPC_META_*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from temporalio.envconfig import ClientConfigProfile

PREFIX = "TEMPORAL_"
CONFIG_FILE = "TEMPORAL_CONFIG_FILE"
PROFILE = "TEMPORAL_PROFILE"

_BOOL: TypeAdapter[bool] = TypeAdapter(bool)

#: settings that mean TLS (an API key is sent over TLS only)
_IMPLY_TLS = (
    "temporal_api_key",
    "temporal_api_key_file",
    "temporal_tls_ca_file",
    "temporal_tls_cert_file",
    "temporal_tls_key_file",
    "temporal_tls_server_name",
)


@dataclass
class StandardTemporal:
    """Field values taken from the standard configuration, the name each came from, and refusals."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _erasure(name: str) -> str:
    return "ERASURE_" + name.upper()


def _load(env: Mapping[str, str]) -> tuple[ClientConfigProfile | None, str | None]:
    config_file = env.get(CONFIG_FILE, "")
    profile = env.get(PROFILE, "") or None
    if config_file:
        try:
            with open(config_file, "rb"):
                pass
        except OSError as exc:
            return None, f"{CONFIG_FILE} cannot be read: {config_file} ({exc.strerror or type(exc).__name__})"
    try:
        loaded = ClientConfigProfile.load(
            profile,
            config_source=Path(config_file) if config_file else None,
            disable_file=not (config_file or profile),
            override_env_vars=dict(env),
        )
    except RuntimeError as exc:  # the bridge's ConfigError; a TOML error quotes the file's lines: not shown
        said = str(exc).strip()
        if said.startswith(("Profile ", "Invalid configuration:")) and "\n" not in said:
            return None, f"the Temporal client configuration is refused: {said[:200]}"
        where = config_file or "the default Temporal configuration file"
        return None, f"{CONFIG_FILE}: {where} is not a valid Temporal configuration file (TOML)"
    return loaded, None


def standard_temporal(env: Mapping[str, str]) -> StandardTemporal:
    """The ``ERASURE_TEMPORAL_*`` values the standard ``TEMPORAL_*`` configuration in ``env`` supplies."""
    result = StandardTemporal()
    env = {k.upper(): v for k, v in env.items()}
    if not any(k.startswith(PREFIX) and v for k, v in env.items()):
        return result
    profile, problem = _load(env)
    if profile is None:
        result.problems.append(problem or "the Temporal client configuration could not be loaded")
        return result
    in_file = f"the Temporal profile '{env.get(PROFILE) or 'default'}' ({CONFIG_FILE})"

    def origin(variable: str, key: str) -> str:
        return variable if env.get(variable) else f"{key} of {in_file}"

    given: list[tuple[str, Any, str]] = []  # (field, value, where it came from)
    if profile.address:
        given.append(("temporal_address", profile.address, origin("TEMPORAL_ADDRESS", "address")))
    if profile.namespace:
        given.append(("temporal_namespace", profile.namespace, origin("TEMPORAL_NAMESPACE", "namespace")))
    if profile.api_key:
        given.append(("temporal_api_key", profile.api_key, origin("TEMPORAL_API_KEY", "api_key")))
    tls = profile.tls
    if tls is not None:
        if tls.disabled is not None:
            given.append(("temporal_tls", not tls.disabled, origin("TEMPORAL_TLS", "tls.disabled")))
        if tls.server_name:
            given.append(
                ("temporal_tls_server_name", tls.server_name, origin("TEMPORAL_TLS_SERVER_NAME", "tls.server_name"))
            )
        for name, source, variable, key in (
            ("temporal_tls_ca_file", tls.server_root_ca_cert, "TEMPORAL_TLS_SERVER_CA_CERT", "server_ca_cert"),
            ("temporal_tls_cert_file", tls.client_cert, "TEMPORAL_TLS_CLIENT_CERT", "client_cert"),
            ("temporal_tls_key_file", tls.client_private_key, "TEMPORAL_TLS_CLIENT_KEY", "client_key"),
        ):
            if source is None:
                continue
            if not isinstance(source, Path):
                where = origin(f"{variable}_DATA", f"tls.{key}_data")
                result.problems.append(f"{where}: give it as a file ({variable}_PATH or {_erasure(name)})")
                continue
            given.append((name, str(source), origin(f"{variable}_PATH", f"tls.{key}_path")))
    tls_given = env.get("TEMPORAL_TLS", "")
    if tls_given and (tls is None or tls.disabled is None):  # the SDK ignores what it cannot read
        result.problems.append(f"TEMPORAL_TLS must be true or false, got {tls_given!r}")
    if profile.grpc_meta:
        result.problems.append("TEMPORAL_GRPC_META_* (gRPC headers) are not supported here")

    for name, value, where in given:
        mine = env.get(_erasure(name), "")
        if name == "temporal_api_key" and env.get(_erasure("temporal_api_key_file")):
            result.problems.append(f"set {_erasure('temporal_api_key_file')} or {where}, not both")
        elif not mine:
            result.values[name] = value
            result.origins[name] = where
        elif not _same(name, mine, value):
            result.problems.append(f"{_erasure(name)} and {where} differ: set one of them")
    if profile.tls is not None and profile.tls.disabled is True:
        implying = [_erasure(n) for n in _IMPLY_TLS if env.get(_erasure(n))]
        implying += [where for name, _value, where in given if name in _IMPLY_TLS]
        if implying:
            result.problems.append(
                f"{origin('TEMPORAL_TLS', 'tls.disabled')} turns TLS off, but {', '.join(implying)} "
                f"{'requires' if len(implying) == 1 else 'require'} TLS"
            )
    return result


def _same(name: str, mine: str, theirs: Any) -> bool:
    if isinstance(theirs, bool):
        try:
            return _BOOL.validate_python(mine.strip()) is theirs
        except ValidationError:
            return True  # the setting's own check names the malformed value
    return bool(mine == theirs)

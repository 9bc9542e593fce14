"""One typed settings object, read from ``ERASURE_*`` environment variables (pydantic-settings).

``Settings`` is composed of one model of fields per area (the modules ``stack``, ``storage``, ``stores``,
``console``, ``erasure``, ``secrets``, ``observability`` and ``schedules``), what is derived from them
(``accessors``) and the checks of single values (``checks``); this module reads them and checks them together.
The names stay flat whatever the area.

Every field's variable is ``ERASURE_`` + its name in capitals; its description is the meaning shown in
docs/configuration.md, and ``json_schema_extra={"required_in_production": True}`` marks what production mode insists on.
``settings_doc()`` lists them all, and ``workers/settings_doc.py`` renders docs/configuration.md from it;
the tests check that page and the deploy files against it.

Two modes (``ERASURE_MODE``):

- ``local`` (default): empty endpoints mean the embedded local stack, and secrets left empty are read from
  the local stack's secrets file (``workers/local_secrets.py``).
- ``production``: every field marked required must be set, every secret must come from its variable or from
  the file its ``*_FILE`` variable names (a Kubernetes secret volume, say), and the local secrets file is
  never read or created.

Secrets are ``SecretStr`` (``**********`` in repr, str and errors). A secret read from ``ERASURE_X_FILE``
lands in field ``x`` (the file is read once, when the settings are built). A bad value becomes one
``ConfigError`` line naming the variable, never a traceback and never the secret's value: URLs must have an
allowed scheme, a host and a port in 1..65535, the Temporal address must be ``host:port``, and certificate
and key files must be readable PEM (``workers/config_checks.py``); every such problem is named in that line.

The standard ``TEMPORAL_*`` client configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_PROFILE``, ...) fills the
``ERASURE_TEMPORAL_*`` settings left unset, through ``temporalio.envconfig`` (``workers/temporal_env.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from workers.errors import ConfigError
from workers.settings import reading
from workers.settings.checks import CERTIFICATE_FILES, KEY_FILES, URL_LIST_RULES, URL_RULES, Checked
from workers.settings.names import HEX_SECRETS, NOT_SETTINGS, PREFIX, SECRET_FILES, Port, var
from workers.settings.ports import claimed_ports, overlap_problem
from workers.temporal_env import standard_temporal

__all__ = [
    "CERTIFICATE_FILES",
    "HEX_SECRETS",
    "KEY_FILES",
    "NOT_SETTINGS",
    "PREFIX",
    "SECRET_FILES",
    "URL_LIST_RULES",
    "URL_RULES",
    "Port",
    "Settings",
    "required_in_production",
    "settings_doc",
    "store_settings",
    "unknown_settings",
    "var",
]


def store_settings() -> dict[str, str]:
    """The settings the registered stores declare for themselves: ``ERASURE_<NAME>`` -> meaning, from each
    adapter's ``settings`` (entry points ``erasure.adapters``). A store added as a folder of its own declares
    its variables there and reads them as options (``workers.wiring.store_options``), with no edit to this
    module: one route for every store (``ERASURE_QDRANT_PATH``). An adapter whose module cannot be imported
    declares nothing here (the registry reports it by name when the worker starts)."""
    from importlib.metadata import entry_points

    from stores.adapters.interface import ENTRY_POINT_GROUP

    declared: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            adapter = ep.load()
        except ImportError:
            continue
        for name, meaning in dict(getattr(adapter, "settings", None) or {}).items():
            declared[var(str(name))] = str(meaning)
    return declared


def unknown_settings(environ: Mapping[str, str]) -> None:
    """``ConfigError`` naming every ``ERASURE_*`` variable that is no setting (of the worker, or declared by a
    registered store: ``store_settings``), with the closest one that is: a misspelled name
    (``ERASURE_TEMPORAL_TLS_CA`` for ``..._CA_FILE``) must not be ignored and silently fall back to a default
    (there: plain gRPC)."""
    import difflib

    known = {var(name) for name in Settings.model_fields}
    unknown = sorted(
        name for name in environ if name.upper().startswith(PREFIX) and name.upper() not in known | NOT_SETTINGS
    )
    if unknown:  # the stores' own settings, read only when needed (loading the adapters imports their stores)
        known |= set(store_settings())
        unknown = [name for name in unknown if name.upper() not in known]
    if not unknown:
        return
    said = []
    for name in unknown:
        longer = sorted(k for k in known if k.startswith(name.upper() + "_"))  # a suffix left off: _FILE, _URL
        close = longer[:1] or difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.75)
        said.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise ConfigError(f"unknown setting{'s' if len(said) > 1 else ''}: {', '.join(said)}; nothing was started")


class Settings(Checked, BaseSettings):
    """Every setting of the worker and the CLI; typed accessors below derive endpoints and ports."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, frozen=True, extra="forbid", case_sensitive=False, validate_default=True
    )

    # ----- construction -------------------------------------------------------------------------

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, reading.MappingEnvSource(settings_cls))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings from ``environ`` (default ``os.environ``); a ``ConfigError`` naming the variable.

        ``TEMPORAL_*`` values fill the ``ERASURE_TEMPORAL_*`` settings left unset (``workers/temporal_env.py``);
        their problems and the settings' own are reported together, in one line."""
        env = os.environ if environ is None else environ
        unknown_settings(env)
        standard = standard_temporal(env)
        token = reading.ENVIRON.set(environ)
        try:
            settings = cls(**standard.values)
        except ValidationError as exc:
            problems = [*standard.problems, *reading.problems(exc, env, standard.origins)]
            raise ConfigError("; ".join(problems)) from None
        except ConfigError as exc:
            raise ConfigError("; ".join([*standard.problems, str(exc)])) from None
        finally:
            reading.ENVIRON.reset(token)
        if standard.problems:
            raise ConfigError("; ".join(standard.problems))
        return settings

    # ----- checks across settings ---------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _read_secret_files(cls, data: Any) -> Any:
        """``ERASURE_X_FILE`` -> field ``x``: read once, here; missing, unreadable or empty is an error."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for secret, file_field in SECRET_FILES.items():
            path = str(data.get(file_field) or "")
            if not path:
                continue
            given = data.get(secret)
            if isinstance(given, SecretStr):
                given = given.get_secret_value()
            if given:
                raise ConfigError(f"set {var(secret)} or {var(file_field)}, not both")
            try:
                value = Path(path).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ConfigError(f"{var(file_field)}: cannot read {path}: {reason}") from None
            if not value:
                raise ConfigError(f"{var(file_field)}: {path} is empty")
            data[secret] = value
        return data

    def _check_temporal_oauth(self) -> None:
        problem = _oauth_problem(self)
        if problem:
            raise ConfigError(problem)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        for name in HEX_SECRETS:
            value = self.secret_value(name)
            if value and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
                raise ConfigError(f"{var(name)}{self._from(name)} must be 32 bytes (64 hex digits)")
        for i, key in enumerate(self.payload_old_key_list):
            if not re.fullmatch(r"[0-9a-fA-F]{64}", key):
                where = var("payload_old_keys") + self._from("payload_old_keys")
                raise ConfigError(f"{where}: key {i + 1} must be 32 bytes (64 hex digits); separate keys with commas")
        if self.worker_build_id and not self.worker_deployment_name:
            raise ConfigError("ERASURE_WORKER_BUILD_ID needs ERASURE_WORKER_DEPLOYMENT_NAME (the deployment it is of)")
        if "." in self.worker_deployment_name:
            raise ConfigError("ERASURE_WORKER_DEPLOYMENT_NAME must not contain '.' (Temporal joins name.build_id)")
        if bool(self.temporal_tls_cert_file) != bool(self.temporal_tls_key_file):
            raise ConfigError("ERASURE_TEMPORAL_TLS_CERT_FILE and ERASURE_TEMPORAL_TLS_KEY_FILE go together: set both")
        self._check_temporal_oauth()
        ports = overlap_problem(claimed_ports(self))
        if ports:
            raise ConfigError(ports)
        if self.mode == "production":
            missing = [reading.or_standard(var(name)) for name in required_in_production() if not self._plain(name)]
            if missing:
                raise ConfigError(
                    f"ERASURE_MODE=production requires {', '.join(missing)} (secrets may come from the "
                    "matching *_FILE variable); nothing is read from or created in the state directory"
                )
        return self


def _oauth_problem(settings: Settings) -> str | None:
    """Why the Temporal client-credentials settings cannot be used as given (``None``: they can)."""
    url = settings.temporal_oauth_token_url
    own_pair = (settings.temporal_oauth_client_id, settings.secret_value("temporal_oauth_client_secret"))
    ui_pair = (settings.temporal_ui_oauth_client_id, settings.secret_value("temporal_ui_oauth_client_secret"))
    own, ui = any(own_pair), any(ui_pair)
    if (own or ui) and not url:
        return "ERASURE_TEMPORAL_OAUTH_* client settings need ERASURE_TEMPORAL_OAUTH_TOKEN_URL"
    if url and not url.startswith(("https://", "http://")):
        return "ERASURE_TEMPORAL_OAUTH_TOKEN_URL must be an http(s) URL"
    if own and not all(own_pair):
        return "ERASURE_TEMPORAL_OAUTH_CLIENT_ID and ERASURE_TEMPORAL_OAUTH_CLIENT_SECRET go together: set both"
    if ui and not all(ui_pair):
        return "ERASURE_TEMPORAL_UI_OAUTH_CLIENT_ID and ERASURE_TEMPORAL_UI_OAUTH_CLIENT_SECRET go together: set both"
    if own and (settings.secret_value("temporal_api_key") or settings.temporal_api_key_file):
        return "set ERASURE_TEMPORAL_API_KEY or ERASURE_TEMPORAL_OAUTH_CLIENT_ID, not both (both are the bearer token)"
    return None


def _default_text(info: FieldInfo) -> str:
    value = info.default
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _is_required(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and extra.get("required_in_production") is True


def required_in_production() -> Iterator[str]:
    """Names of the fields production mode requires."""
    return (name for name, info in Settings.model_fields.items() if _is_required(info))


def settings_doc() -> list[tuple[str, str, str, bool]]:
    """(variable, default, meaning, required in production) for every setting."""
    return [
        (var(name), _default_text(info), info.description or "", _is_required(info))
        for name, info in Settings.model_fields.items()
    ]

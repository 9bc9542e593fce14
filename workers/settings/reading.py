"""How the settings are read: the environment source reading the mapping ``Settings.from_env`` was given, and
the wording of what is wrong with them (one phrase per bad variable, never a secret's value)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pydantic import ValidationError
from pydantic_settings import EnvSettingsSource

from workers.settings.names import SECRET_FILES, var

#: the mapping ``Settings.from_env`` reads (``None``: ``os.environ``), set while the settings are built
ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("erasure_settings_environ", default=None)


class MappingEnvSource(EnvSettingsSource):
    """The environment source, reading the mapping given to ``Settings.from_env`` (``os.environ`` by default)."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        environ = ENVIRON.get()
        env = os.environ if environ is None else environ
        return {k.lower(): v for k, v in env.items()}


def or_standard(variable: str) -> str:
    return f"{variable} (or TEMPORAL_ADDRESS)" if variable == var("temporal_address") else variable


def describe(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind == "value_error":  # our own checks: worded to follow the name, a value shown only when not secret
        return str(ctx.get("error", "is invalid"))
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be an integer"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    return str(error.get("msg", "is invalid")).lower()


def problems(exc: ValidationError, env: Mapping[str, str], origins: Mapping[str, str]) -> list[str]:
    """One phrase naming each bad variable (the ``TEMPORAL_*`` one or the ``*_FILE`` one a value came from).
    Values are shown for plain settings only, never for secrets."""
    given = {k.upper() for k, v in env.items() if v}
    parts = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error.get("loc") else ""
        where = origins.get(name) or (var(name) if name else "settings")
        file_field = SECRET_FILES.get(name)
        if file_field and name not in origins and var(file_field) in given:
            where = f"{var(name)} (from {var(file_field)})"
        shown = ""
        if name and name not in SECRET_FILES and isinstance(error.get("input"), str) and error["type"] != "value_error":
            shown = f", got {error['input']!r}"
        parts.append(f"{where} {describe(error)}{shown}")
    return parts

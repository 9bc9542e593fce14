"""The names every settings module shares: the ``ERASURE_`` prefix, a field's variable, the port type, the
production-required marker, and which secrets may come from a file."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

PREFIX = "ERASURE_"

#: ``json_schema_extra`` of a field production mode insists on
REQUIRED_IN_PRODUCTION: dict[str, Any] = {"required_in_production": True}

Port = Annotated[int, Field(ge=1, le=65535)]

#: secret field -> the field naming a file that may hold it instead (``ERASURE_<SECRET>_FILE``)
SECRET_FILES: dict[str, str] = {
    "database_url": "database_url_file",
    "console_database_url": "console_database_url_file",
    "cache_url": "cache_url_file",
    "webhook_secret": "webhook_secret_file",
    "smtp_url": "smtp_url_file",
    "subject_key_secret": "subject_key_secret_file",
    "signing_key": "signing_key_file",
    "payload_key": "payload_key_file",
    "payload_old_keys": "payload_old_keys_file",
    "codec_token": "codec_token_file",
    "temporal_api_key": "temporal_api_key_file",
    "temporal_oauth_client_secret": "temporal_oauth_client_secret_file",
    "temporal_ui_oauth_client_secret": "temporal_ui_oauth_client_secret_file",
}

#: secrets that are 32 random bytes written as 64 hex digits
HEX_SECRETS = ("subject_key_secret", "signing_key", "payload_key")

#: ``ERASURE_*`` variables that are not settings: the test suite's own knobs (see tests/unit/test_replay.py)
NOT_SETTINGS = frozenset({"ERASURE_LOAD_USERS", "ERASURE_RECORD_HISTORY", "ERASURE_RECORD_FORGET_HISTORY"})


def var(name: str) -> str:
    """The environment variable of field ``name``."""
    return PREFIX + name.upper()


def file_help(secret: str) -> str:
    return f"File holding {var(secret)} (a mounted secret); set one of the two, not both."

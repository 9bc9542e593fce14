"""The console's own database login (issue 40): ``erasure serve`` connects with ERASURE_CONSOLE_DATABASE_URL (the
local stack's ``erasure_console`` by default), while migrations and the worker keep the owner's URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.errors import ConfigError
from workers.settings import Settings
from workers.wiring import console_settings

HEX = "ab" * 32


def _production(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "ERASURE_MODE": "production",
        "ERASURE_STATE_DIR": str(tmp_path / "state"),
        "ERASURE_TEMPORAL_ADDRESS": "temporal:7233",
        "ERASURE_DATABASE_URL": "postgresql://owner:owner-pw@db:5432/erasure",
        "ERASURE_S3_ENDPOINT": "aws",
        "ERASURE_KMS_ENDPOINT": "aws",
        "ERASURE_KMS_KEY_ID": "arn:aws:kms:us-east-1:1:key/k",
        "ERASURE_SUBJECT_KEY_SECRET": HEX,
        "ERASURE_SIGNING_KEY": HEX,
        "ERASURE_PAYLOAD_KEY": HEX,
        **extra,
    }


def test_locally_the_console_connects_as_the_stacks_console_login() -> None:
    settings = Settings.from_env({"ERASURE_PG_PORT": "55999"})
    console = console_settings(settings)
    assert console.postgres_url == "postgresql://erasure_console@127.0.0.1:55999/postgres"
    assert settings.postgres_url == "postgresql://postgres@127.0.0.1:55999/postgres"  # migrations, the worker


def test_a_given_console_url_gets_the_same_tls_parameters_as_the_owners(tmp_path: Path) -> None:
    secret = tmp_path / "console-db"
    secret.write_text("postgresql://console:console-pw@db:5432/erasure\n")
    settings = Settings.from_env(
        _production(
            tmp_path,
            ERASURE_CONSOLE_DATABASE_URL_FILE=str(secret),
            ERASURE_DATABASE_SSLMODE="verify-full",
        )
    )
    console = console_settings(settings)
    assert console.postgres_url == "postgresql://console:console-pw@db:5432/erasure?sslmode=verify-full"
    assert settings.postgres_url == "postgresql://owner:owner-pw@db:5432/erasure?sslmode=verify-full"
    for shown in (repr(settings), str(settings.model_dump()), repr(console)):
        assert "console-pw" not in shown  # a secret, as the owner's URL is


def test_production_refuses_to_serve_without_a_console_login(tmp_path: Path) -> None:
    settings = Settings.from_env(_production(tmp_path))  # the worker's settings are complete without it
    with pytest.raises(ConfigError, match="ERASURE_CONSOLE_DATABASE_URL is not set"):
        console_settings(settings)


def test_locally_with_an_external_database_and_no_console_login_the_console_keeps_its_url() -> None:
    settings = Settings.from_env({"ERASURE_DATABASE_URL": "postgresql://dev@db/x"})
    assert console_settings(settings).postgres_url == "postgresql://dev@db/x"  # `erasure serve` warns


def test_a_malformed_console_url_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"ERASURE_CONSOLE_DATABASE_URL": "mysql://u:hidden-pw@db/x"})
    assert "ERASURE_CONSOLE_DATABASE_URL" in str(caught.value)
    assert "hidden-pw" not in str(caught.value)

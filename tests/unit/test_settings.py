from __future__ import annotations

import re
from pathlib import Path

import pytest

from workers.errors import ConfigError
from workers.local_secrets import create_local_secrets, load_secrets, secrets_file
from workers.settings import Settings, settings_doc

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_point_at_the_local_stack() -> None:
    s = Settings.from_env({})
    assert s.embedded_postgres
    assert s.embedded_s3
    assert s.embedded_kms
    assert s.embedded_temporal
    assert s.postgres_url == "postgresql://postgres@127.0.0.1:55432/postgres"
    assert s.temporal_target == "127.0.0.1:7233"
    assert s.ui_url == "http://127.0.0.1:8233"
    assert s.ingestion_delay == 3600


def test_external_services_and_aws() -> None:
    s = Settings.from_env(
        {
            "ERASURE_DATABASE_URL": "postgresql://db/x",
            "ERASURE_S3_ENDPOINT": "aws",
            "ERASURE_KMS_ENDPOINT": "aws",
        }
    )
    assert not s.embedded_postgres
    assert s.postgres_url == "postgresql://db/x"
    assert s.s3_url is None
    assert s.kms_url is None


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("ERASURE_PG_PORT", "x", "ERASURE_PG_PORT must be an integer"),
        ("ERASURE_S3_PORT", "70000", "ERASURE_S3_PORT must be a port number"),
        ("ERASURE_INGESTION_DELAY_SECONDS", "-1", "must not be negative"),
        ("ERASURE_DUE_DAYS", "0", "must be positive"),
        ("ERASURE_LOG_FORMAT", "xml", "auto, json or console"),
    ],
)
def test_bad_values_are_clear_errors(var: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env({var: value})


def test_every_setting_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for var, default, _help, _required in settings_doc():
        row = re.search(rf"^\| `{var}` \| ([^|]*) \|", readme, re.MULTILINE)
        assert row, f"{var} missing from the README configuration table"
        shown = row.group(1).strip().strip("`")
        assert shown == (default or "(empty)"), f"{var}: README says {shown!r}, code says {default!r}"


def test_secrets_are_generated_once_with_private_mode(tmp_path: Path) -> None:
    s = Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path)})
    first = create_local_secrets(s)
    second = load_secrets(s)
    assert first == second
    assert len(first.subject_key_secret) == 32
    assert secrets_file(s).stat().st_mode & 0o077 == 0


def test_secrets_from_environment_win(tmp_path: Path) -> None:
    s = Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path), "ERASURE_SUBJECT_KEY_SECRET": "ab" * 32})
    create_local_secrets(s)
    assert load_secrets(s).subject_key_secret == bytes.fromhex("ab" * 32)
    with pytest.raises(ConfigError, match="32 bytes"):
        load_secrets(Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path), "ERASURE_PAYLOAD_KEY": "ab"}))

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workers import settings_doc
from workers.errors import ConfigError
from workers.local_secrets import create_local_secrets, load_secrets, secrets_file
from workers.settings import Settings
from workers.settings import settings_doc as settings_doc_rows


def start_worker(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``erasure worker`` in a subprocess with exactly ``env``: how a refusal at start is seen."""
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", "worker"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_defaults_point_at_the_local_stack() -> None:
    s = Settings.from_env({})
    assert s.embedded_postgres
    assert s.embedded_s3
    assert s.embedded_kms
    assert s.embedded_temporal
    assert s.postgres_url == "postgresql://postgres@127.0.0.1:55432/postgres"
    assert s.temporal_target == "127.0.0.1:7233"
    assert s.ui_url == "http://127.0.0.1:8088/temporal"  # the local UI, decoded behind the console's login
    assert s.local_ui_url == "http://127.0.0.1:8233/temporal"
    assert s.ui_proxy_upstream == "http://127.0.0.1:8233"
    assert s.codec_origins == frozenset({"http://127.0.0.1:8088"})
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
        ("ERASURE_PG_PORT", "x", "ERASURE_PG_PORT must be an integer, got 'x'"),
        ("ERASURE_S3_PORT", "70000", "ERASURE_S3_PORT must be at most 65535"),
        ("ERASURE_TEMPORAL_PORT", "0", "ERASURE_TEMPORAL_PORT must be at least 1"),
        ("ERASURE_INGESTION_DELAY_SECONDS", "-1", "ERASURE_INGESTION_DELAY_SECONDS must be at least 0"),
        ("ERASURE_DUE_DAYS", "0", "ERASURE_DUE_DAYS must be at least 1"),
        ("ERASURE_LOG_FORMAT", "xml", "ERASURE_LOG_FORMAT must be 'auto', 'json' or 'console'"),
        ("ERASURE_S3_DELETE_BATCH", "1001", "ERASURE_S3_DELETE_BATCH must be at most 1000"),
        ("ERASURE_POOL_SIZE", "0", "ERASURE_POOL_SIZE must be at least 1"),
        ("ERASURE_POOL_TIMEOUT_SECONDS", "0", "ERASURE_POOL_TIMEOUT_SECONDS must be greater than 0"),
        ("ERASURE_KEY_CACHE_TTL_SECONDS", "soon", "ERASURE_KEY_CACHE_TTL_SECONDS must be a number"),
        ("ERASURE_PER_USER_KMS_KEYS", "maybe", "ERASURE_PER_USER_KMS_KEYS must be true or false"),
        ("ERASURE_MODE", "prod", "ERASURE_MODE must be 'local' or 'production'"),
    ],
)
def test_bad_values_are_one_line_naming_the_variable(var: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        Settings.from_env({var: value})
    assert "\n" not in str(caught.value)


def test_the_configuration_page_is_generated_from_the_settings() -> None:
    """docs/configuration.md is what ``make docs`` renders now: a setting added, renamed or re-described without
    regenerating the page fails here."""
    page = settings_doc.CONFIGURATION.read_text()
    assert page == settings_doc.render(page), "docs/configuration.md is stale: run make docs"


def test_the_settings_table_lists_every_variable_with_its_default() -> None:
    rows = re.findall(r"^\| `(ERASURE_[A-Z0-9_]+)` \| ([^|]*) \| (.*) \|$", settings_doc.settings_table(), re.MULTILINE)
    table = {name: (default.strip(), meaning.strip()) for name, default, meaning in rows}
    documented = settings_doc_rows()
    assert list(table) == [var for var, _d, _h, _r in documented]
    for var, default, help_, required in documented:
        shown, meaning = table[var]
        assert shown.strip("`") == (default or "(empty)"), f"{var}: the page says {shown!r}, code says {default!r}"
        assert meaning == help_ + (" **Required in production.**" if required else ""), f"{var}: meaning differs"


def test_rendering_keeps_the_prose_around_the_table() -> None:
    begin, end = settings_doc.begin_marker("settings table"), settings_doc.end_marker("settings table")
    page = f"# Configuration\n\nhand-written prose\n\n{begin}\n| old | table |\n{end}\n\nmore prose\n"
    fresh = settings_doc.render(page)
    assert (
        fresh
        == f"# Configuration\n\nhand-written prose\n\n{begin}\n{settings_doc.settings_table()}{end}\n\nmore prose\n"
    )
    assert settings_doc.render(fresh) == fresh
    with pytest.raises(settings_doc.MarkersMissing):
        settings_doc.render("# Configuration\n\nno markers\n")


def test_check_mode_says_when_the_page_is_stale(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    begin, end = settings_doc.begin_marker("settings table"), settings_doc.end_marker("settings table")
    page.write_text(f"prose\n{begin}\nstale\n{end}\n")
    assert settings_doc.main(["--path", str(page), "--check"]) == 1
    assert "stale" in page.read_text()
    assert settings_doc.main(["--path", str(page)]) == 0
    assert settings_doc.main(["--path", str(page), "--check"]) == 0


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


# ----- production mode, secrets from files, every setting reachable ---------------------------------------

HEX = {"subject": "11" * 32, "signing": "22" * 32, "payload": "33" * 32}


def _production_env(tmp_path: Path) -> dict[str, str]:
    files = {}
    for name, value in HEX.items():
        files[name] = tmp_path / f"{name}.secret"
        files[name].write_text(value + "\n")  # mounted secret files often end in a newline
    (tmp_path / "db.secret").write_text("postgresql://erasure:pw-in-file@db:5432/erasure")
    return {
        "ERASURE_MODE": "production",
        "ERASURE_STATE_DIR": str(tmp_path / "state"),
        "ERASURE_TEMPORAL_ADDRESS": "temporal:7233",
        "ERASURE_DATABASE_URL_FILE": str(tmp_path / "db.secret"),
        "ERASURE_S3_ENDPOINT": "aws",
        "ERASURE_KMS_ENDPOINT": "aws",
        "ERASURE_KMS_KEY_ID": "arn:aws:kms:us-east-1:1:key/k",
        "ERASURE_SUBJECT_KEY_SECRET_FILE": str(files["subject"]),
        "ERASURE_SIGNING_KEY_FILE": str(files["signing"]),
        "ERASURE_PAYLOAD_KEY": HEX["payload"],
    }


def test_production_reads_secrets_from_files_and_never_shows_them(tmp_path: Path) -> None:
    s = Settings.from_env(_production_env(tmp_path))
    assert s.production
    assert s.postgres_url == "postgresql://erasure:pw-in-file@db:5432/erasure"
    loaded = load_secrets(s)
    assert loaded.subject_key_secret == bytes.fromhex(HEX["subject"])
    assert loaded.signing_key == bytes.fromhex(HEX["signing"])
    assert loaded.payload_key == bytes.fromhex(HEX["payload"])
    for shown in (repr(s), str(s), repr(loaded), str(s.model_dump())):
        for value in (*HEX.values(), "pw-in-file"):
            assert value not in shown
    assert not (tmp_path / "state").exists()


def test_child_environment_carries_secret_values_not_file_paths(tmp_path: Path) -> None:
    s = Settings.from_env(_production_env(tmp_path))
    env = s.env()
    assert env["ERASURE_SUBJECT_KEY_SECRET"] == HEX["subject"]
    assert env["ERASURE_SUBJECT_KEY_SECRET_FILE"] == ""
    assert Settings.from_env(env) == s.model_copy(
        update={"database_url_file": "", "subject_key_secret_file": "", "signing_key_file": ""}
    )


@pytest.mark.parametrize(
    "missing",
    [
        "ERASURE_TEMPORAL_ADDRESS",
        "ERASURE_DATABASE_URL_FILE",
        "ERASURE_S3_ENDPOINT",
        "ERASURE_KMS_ENDPOINT",
        "ERASURE_KMS_KEY_ID",
        "ERASURE_SUBJECT_KEY_SECRET_FILE",
        "ERASURE_SIGNING_KEY_FILE",
        "ERASURE_PAYLOAD_KEY",
    ],
)
def test_production_refuses_to_start_without_a_required_setting(tmp_path: Path, missing: str) -> None:
    env = _production_env(tmp_path)
    del env[missing]
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert missing.removesuffix("_FILE") in message
    assert "\n" not in message
    for value in (*HEX.values(), "pw-in-file"):
        assert value not in message
    assert not (tmp_path / "state").exists()


def test_production_never_reads_nor_creates_the_local_secrets_file(tmp_path: Path) -> None:
    local = Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path / "state")})
    create_local_secrets(local)  # a local secrets file exists, and must be ignored
    env = {**_production_env(tmp_path), "ERASURE_STATE_DIR": str(tmp_path / "state")}
    s = Settings.from_env(env)
    assert load_secrets(s).payload_key == bytes.fromhex(HEX["payload"])
    with pytest.raises(ConfigError, match="never creates secrets"):
        create_local_secrets(s)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ERASURE_SIGNING_KEY_FILE": "/nonexistent/signing"}, "ERASURE_SIGNING_KEY_FILE: cannot read"),
        ({"ERASURE_SIGNING_KEY": "22" * 32}, "set ERASURE_SIGNING_KEY or ERASURE_SIGNING_KEY_FILE, not both"),
        ({"ERASURE_PAYLOAD_KEY": "not hex at all"}, "ERASURE_PAYLOAD_KEY must be 32 bytes"),
    ],
)
def test_bad_secrets_are_one_line_without_the_value(tmp_path: Path, change: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        Settings.from_env({**_production_env(tmp_path), **change})
    assert "not hex at all" not in str(caught.value)


def test_a_malformed_secret_file_names_the_file_variable(tmp_path: Path) -> None:
    env = _production_env(tmp_path)
    Path(env["ERASURE_SIGNING_KEY_FILE"]).write_text("abcd")
    with pytest.raises(ConfigError, match=r"ERASURE_SIGNING_KEY \(from ERASURE_SIGNING_KEY_FILE\) must be 32 bytes"):
        Settings.from_env(env)
    Path(env["ERASURE_SIGNING_KEY_FILE"]).write_text("\n")
    with pytest.raises(ConfigError, match=r"ERASURE_SIGNING_KEY_FILE: .* is empty"):
        Settings.from_env(env)


def test_store_settings_reach_the_platform_config(tmp_path: Path) -> None:
    from workers.wiring import platform_config

    env = {
        **_production_env(tmp_path),
        "ERASURE_POOL_SIZE": "3",
        "ERASURE_POOL_TIMEOUT_SECONDS": "2.5",
        "ERASURE_KEY_CACHE_TTL_SECONDS": "0",
        "ERASURE_PER_USER_KMS_KEYS": "true",
        "ERASURE_S3_DELETE_BATCH": "250",
    }
    config = platform_config(Settings.from_env(env))
    assert (config.pool_size, config.pool_timeout, config.key_cache_ttl) == (3, 2.5, 0.0)
    assert config.per_user_kms_keys is True
    assert config.s3_delete_batch == 250
    assert config.kms_key_id == "arn:aws:kms:us-east-1:1:key/k"
    assert config.subject_secret == bytes.fromhex(HEX["subject"])
    assert config.aws.s3_url is None
    assert config.aws.kms_url is None


def test_a_misspelled_variable_fails_the_start_naming_the_one_meant(tmp_path: Path) -> None:
    """Issue 31, item 4: ``ERASURE_TEMPORAL_TLS_CA`` (for ``..._CA_FILE``) was ignored and the worker connected
    over plain gRPC. An unknown ``ERASURE_*`` name now stops the start, with the closest real name."""
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"ERASURE_TEMPORAL_TLS_CA": "/etc/ca.pem", "ERASURE_DATABSE_URL": "postgresql://x"})
    said = str(refused.value)
    assert "ERASURE_TEMPORAL_TLS_CA (did you mean ERASURE_TEMPORAL_TLS_CA_FILE?)" in said
    assert "ERASURE_DATABSE_URL (did you mean ERASURE_DATABASE_URL?)" in said
    assert "postgresql://x" not in said  # names only, never a value
    assert Settings.from_env({"ERASURE_RECORD_HISTORY": "x"}).mode == "local"  # the test suite's own knobs
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ERASURE_TEMPORAL_TLS_CA": "/etc/ca.pem"}
    started = start_worker(env, tmp_path)
    assert started.returncode == 2, started.stdout + started.stderr
    assert "did you mean ERASURE_TEMPORAL_TLS_CA_FILE?" in started.stderr
    assert not (tmp_path / ".state").exists()  # nothing written before the refusal

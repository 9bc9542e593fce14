"""Issue 31, item 4: URLs, addresses and certificate files are checked at start, and the standard ``TEMPORAL_*``
client configuration (``temporalio.envconfig``) fills the ``ERASURE_TEMPORAL_*`` settings left unset.

Every refusal is one line naming the variable (never a secret's value, never a file's contents), and the
process exits 2 before it writes anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from temporalio.service import TLSConfig

from tests.tls_fixture import Pki, make_pki
from tests.unit.test_settings import HEX, _production_env, start_worker
from workers.errors import ConfigError
from workers.settings import Settings
from workers.temporal_client import settings_tls, tls_config

SECRET = "pw-SECRET-never-shown"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def _refused(env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert "\n" not in message
    for value in (SECRET, *HEX.values(), "pw-in-file"):
        assert value not in message
    return message


_URL = "must be an http(s) URL"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"ERASURE_S3_ENDPOINT": "minio:9000"}, "ERASURE_S3_ENDPOINT must be an http(s) URL or 'aws' (it has no"),
        ({"ERASURE_KMS_ENDPOINT": "ftp://kms:4599"}, "ERASURE_KMS_ENDPOINT must be an http(s) URL or 'aws' (its sch"),
        ({"ERASURE_CONSOLE_URL": "https://console .example.com"}, f"ERASURE_CONSOLE_URL {_URL} (it holds a space"),
        ({"ERASURE_TEMPORAL_UI_URL": "https://ui:99999/temporal"}, f"ERASURE_TEMPORAL_UI_URL {_URL} (its port"),
        ({"ERASURE_TEMPORAL_UI_UPSTREAM": "http://"}, f"ERASURE_TEMPORAL_UI_UPSTREAM {_URL} or 'none' (it has no host"),
        ({"ERASURE_OIDC_ISSUER": "http://idp.example.com/x"}, "ERASURE_OIDC_ISSUER must be an https URL (production"),
        (
            {"ERASURE_WEBHOOK_URLS": "https://ok.example.com/h, hooks.example.com"},
            f"ERASURE_WEBHOOK_URLS entry {_URL} (it has no scheme), got 'hooks.example.com'",
        ),
        (
            {"ERASURE_CALLBACK_ALLOWED_URLS": "https://crm.example.com/?k=1"},
            f"ERASURE_CALLBACK_ALLOWED_URLS entry {_URL} (it has a user or a query)",
        ),
        (
            {"ERASURE_CODEC_ALLOWED_ORIGINS": "https://cloud.temporal.io/ns"},
            "ERASURE_CODEC_ALLOWED_ORIGINS entry must be an http(s) origin",
        ),
        (
            {"ERASURE_S3_COMPACTION_URL": "http://s3:0"},
            "ERASURE_S3_COMPACTION_URL must be the SeaweedFS master's http(s) URL or 'none'",
        ),
        (
            {"ERASURE_DATABASE_URL_FILE": "", "ERASURE_DATABASE_URL": f"mysql://u:{SECRET}@db/x"},
            "ERASURE_DATABASE_URL must be a postgres:// or postgresql:// URL (its scheme is not allowed)",
        ),
        ({"ERASURE_CACHE_URL": f"http://:{SECRET}@cache:6379"}, "ERASURE_CACHE_URL must be a redis://"),
        ({"ERASURE_SMTP_URL": f"smtp://u:{SECRET}@"}, "ERASURE_SMTP_URL must be a smtp:// or smtps:// URL (it has no"),
        ({"ERASURE_TEMPORAL_ADDRESS": "https://temporal:7233"}, "ERASURE_TEMPORAL_ADDRESS must be host:port"),
        ({"ERASURE_TEMPORAL_ADDRESS": "temporal:70000"}, "ERASURE_TEMPORAL_ADDRESS must be host:port with a port in"),
        ({"ERASURE_TEMPORAL_ADDRESS": "temporal"}, "ERASURE_TEMPORAL_ADDRESS must be host:port"),
    ],
)
def test_a_malformed_url_or_address_is_refused_naming_the_variable(
    tmp_path: Path, change: dict[str, str], said: str
) -> None:
    message = _refused({**_production_env(tmp_path), **change})
    assert said in message, message
    assert not (tmp_path / "state").exists()


def test_a_secret_url_from_a_file_is_named_by_its_file_and_never_shown(tmp_path: Path) -> None:
    env = _production_env(tmp_path)
    Path(env["ERASURE_DATABASE_URL_FILE"]).write_text(f"postgresql://u:{SECRET}@db:99999/x")
    message = _refused(env)
    assert "ERASURE_DATABASE_URL (from ERASURE_DATABASE_URL_FILE) must be a postgres:// or postgresql:// URL" in message


def test_certificate_and_key_files_must_be_readable_pem(tmp_path: Path, pki: Pki) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text(f"-----BEGIN CERTIFICATE-----\n{SECRET}\n-----END CERTIFICATE-----\n")
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    env = {
        **_production_env(tmp_path),
        "ERASURE_TEMPORAL_TLS_CA_FILE": str(tmp_path / "missing-ca.pem"),
        "ERASURE_TEMPORAL_TLS_CERT_FILE": str(not_pem),
        "ERASURE_TEMPORAL_TLS_KEY_FILE": str(pki.client_cert),  # a certificate where the key belongs
        "ERASURE_AWS_CA_BUNDLE": str(pki.client_key),  # a key where certificates belong
        "ERASURE_DATABASE_SSLROOTCERT": str(tmp_path),  # a directory
    }
    message = _refused(env)
    assert f"ERASURE_TEMPORAL_TLS_CA_FILE cannot be read: {tmp_path / 'missing-ca.pem'}" in message
    assert f"ERASURE_TEMPORAL_TLS_CERT_FILE is not a PEM certificate file: {not_pem}" in message
    assert f"ERASURE_TEMPORAL_TLS_KEY_FILE is not a PEM private key file: {pki.client_cert}" in message
    assert f"ERASURE_AWS_CA_BUNDLE is not a PEM certificate file: {pki.client_key}" in message
    assert "ERASURE_DATABASE_SSLROOTCERT cannot be read" in message
    assert "BEGIN" not in message  # never a file's contents
    refused = _refused({**_production_env(tmp_path), "ERASURE_TEMPORAL_TLS_KEY_FILE": str(encrypted)})
    assert "ERASURE_TEMPORAL_TLS_KEY_FILE is an encrypted private key" in refused


def test_every_problem_is_named_in_one_line_and_the_process_exits_2_writing_nothing(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        **_production_env(tmp_path),
        "ERASURE_S3_ENDPOINT": "s3.internal:8333",
        "ERASURE_TEMPORAL_ADDRESS": "temporal",
        "ERASURE_TEMPORAL_TLS_CA_FILE": str(tmp_path / "missing.pem"),
        "ERASURE_SMTP_URL": f"smtp://u:{SECRET}@",
        "ERASURE_PG_PORT": "x",
    }
    started = start_worker(env, tmp_path)
    assert started.returncode == 2, started.stdout + started.stderr
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert lines[0].startswith("erasure: error: ")
    for name in (
        "ERASURE_S3_ENDPOINT",
        "ERASURE_TEMPORAL_ADDRESS",
        "ERASURE_TEMPORAL_TLS_CA_FILE",
        "ERASURE_SMTP_URL",
        "ERASURE_PG_PORT",
    ):
        assert name in lines[0]
    assert SECRET not in started.stderr
    assert not (tmp_path / "state").exists()
    assert not (tmp_path / ".state").exists()


def test_a_good_production_configuration_is_accepted(tmp_path: Path, pki: Pki) -> None:
    env = {
        **_production_env(tmp_path),
        "ERASURE_TEMPORAL_ADDRESS": "temporal-frontend.temporal.svc.cluster.local:7233",
        "ERASURE_TEMPORAL_TLS_CA_FILE": str(pki.ca),
        "ERASURE_TEMPORAL_TLS_CERT_FILE": str(pki.client_cert),
        "ERASURE_TEMPORAL_TLS_KEY_FILE": str(pki.client_key),
        "ERASURE_AWS_CA_BUNDLE": str(pki.ca),
        "ERASURE_DATABASE_SSLMODE": "verify-full",
        "ERASURE_DATABASE_SSLROOTCERT": str(pki.ca),
        "ERASURE_S3_ENDPOINT": "http://s3:8333",
        "ERASURE_S3_COMPACTION_URL": "http://s3:9333",
        "ERASURE_KMS_ENDPOINT": "https://kms.eu-west-1.amazonaws.com",
        "ERASURE_CONSOLE_URL": "https://console.example.com",
        "ERASURE_TEMPORAL_UI_URL": "https://console.example.com/temporal",
        "ERASURE_TEMPORAL_UI_UPSTREAM": "http://temporal-ui:8080",
        "ERASURE_OIDC_ISSUER": "https://idp.example.com/realms/erasure",
        "ERASURE_CODEC_ALLOWED_ORIGINS": "https://cloud.temporal.io, https://ui.example.com:8443/",
        "ERASURE_WEBHOOK_URLS": "https://hooks.example.com/erasure",
        "ERASURE_CALLBACK_ALLOWED_URLS": "https://crm.example.com/callbacks",
        "ERASURE_CACHE_URL": f"rediss://:{SECRET}@cache:6380/0",
        "ERASURE_SMTP_URL": f"smtps://u:{SECRET}@mail.example.com:465",
    }
    s = Settings.from_env(env)
    assert s.temporal_target == "temporal-frontend.temporal.svc.cluster.local:7233"
    assert isinstance(tls_config(settings_tls(s)), TLSConfig)
    assert Settings.from_env({**env, "ERASURE_DATABASE_SSLROOTCERT": "system"}).database_sslrootcert == "system"
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    if system.exists():  # the system bundle, old certificates (negative serial numbers) and all
        assert Settings.from_env({**env, "ERASURE_AWS_CA_BUNDLE": str(system)}).aws_ca_bundle == str(system)
    assert not (tmp_path / "state").exists()


def test_local_mode_keeps_plain_http_for_the_local_identity_provider() -> None:
    s = Settings.from_env({"ERASURE_OIDC_ISSUER": "http://127.0.0.1:8090"})
    assert s.oidc_issuer == "http://127.0.0.1:8090"


# ----- the standard TEMPORAL_* configuration ----------------------------------------------------------------


def test_temporal_variables_apply_when_the_erasure_ones_are_unset(tmp_path: Path) -> None:
    env = _production_env(tmp_path)
    del env["ERASURE_TEMPORAL_ADDRESS"]
    env.update(
        {
            "TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233",
            "TEMPORAL_NAMESPACE": "ns.acct",
            "TEMPORAL_API_KEY": SECRET,
        }
    )
    s = Settings.from_env(env)
    assert (s.temporal_target, s.temporal_namespace) == ("ns.acct.tmprl.cloud:7233", "ns.acct")
    assert s.secret_value("temporal_api_key") == SECRET
    assert SECRET not in repr(s)
    assert tls_config(settings_tls(s), api_key=True) is True  # an API key: TLS with the system's roots
    # the children's environment carries the values as ERASURE_* settings, which agree with TEMPORAL_*
    child = Settings.from_env({**env, **s.env()})
    assert (child.temporal_target, child.temporal_namespace) == (s.temporal_target, s.temporal_namespace)
    assert child.temporal_api_key == s.temporal_api_key


def test_a_temporal_profile_file_applies_through_envconfig(tmp_path: Path, pki: Pki) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        "[profile.default]\n"
        'address = "127.0.0.1:7233"\n'
        "[profile.prod]\n"
        'address = "temporal.example.com:7233"\n'
        'namespace = "erasure-prod"\n'
        "[profile.prod.tls]\n"
        'server_name = "temporal.internal"\n'
        f'server_ca_cert_path = "{pki.ca}"\n'
        f'client_cert_path = "{pki.client_cert}"\n'
        f'client_key_path = "{pki.client_key}"\n'
    )
    env = _production_env(tmp_path)
    del env["ERASURE_TEMPORAL_ADDRESS"]
    s = Settings.from_env({**env, "TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod"})
    assert (s.temporal_target, s.temporal_namespace) == ("temporal.example.com:7233", "erasure-prod")
    assert (s.temporal_tls_ca_file, s.temporal_tls_cert_file) == (str(pki.ca), str(pki.client_cert))
    assert s.temporal_tls_key_file == str(pki.client_key)
    tls = tls_config(settings_tls(s))
    assert isinstance(tls, TLSConfig)
    assert tls.domain == "temporal.internal"
    assert tls.client_private_key == pki.client_key.read_bytes()
    # the environment overrides the file, as envconfig has it
    over = Settings.from_env(
        {**env, "TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "other"}
    )
    assert over.temporal_namespace == "other"
    # a file certificate that is no PEM is named by where it came from
    config.write_text(config.read_text().replace(str(pki.ca), str(tmp_path / "gone.pem")))
    message = _refused({**env, "TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod"})
    assert "server_ca_cert_path of the Temporal profile 'prod' (TEMPORAL_CONFIG_FILE) cannot be read" in message
    refused = _refused({**env, "TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "staging"})
    assert "Profile 'staging' not found" in refused


def test_a_temporal_variable_that_differs_from_its_erasure_setting_is_refused_naming_both(tmp_path: Path) -> None:
    env = {
        **_production_env(tmp_path),
        "TEMPORAL_ADDRESS": "elsewhere:7233",
        "ERASURE_TEMPORAL_API_KEY": "one-key",
        "TEMPORAL_API_KEY": SECRET,
    }
    message = _refused(env)
    assert "ERASURE_TEMPORAL_ADDRESS and TEMPORAL_ADDRESS differ" in message
    assert "ERASURE_TEMPORAL_API_KEY and TEMPORAL_API_KEY differ" in message
    assert "one-key" not in message
    same = Settings.from_env({**_production_env(tmp_path), "TEMPORAL_ADDRESS": "temporal:7233"})
    assert same.temporal_target == "temporal:7233"  # both set, to the same value: fine


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"TEMPORAL_ADDRESS": "https://t:7233"}, "TEMPORAL_ADDRESS must be host:port"),
        ({"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS must be true or false, got 'maybe'"),
        ({"TEMPORAL_TLS": "false", "TEMPORAL_API_KEY": SECRET}, "TEMPORAL_TLS turns TLS off, but TEMPORAL_API_KEY"),
        ({"TEMPORAL_TLS_CLIENT_KEY_DATA": SECRET}, "TEMPORAL_TLS_CLIENT_KEY_DATA: give it as a file"),
        ({"TEMPORAL_GRPC_META_AUTHORIZATION": SECRET}, "TEMPORAL_GRPC_META_* (gRPC headers) are not supported"),
        ({"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml"}, "TEMPORAL_CONFIG_FILE cannot be read"),
    ],
)
def test_standard_temporal_values_that_cannot_apply_are_refused(
    tmp_path: Path, change: dict[str, str], said: str
) -> None:
    env = _production_env(tmp_path)
    del env["ERASURE_TEMPORAL_ADDRESS"]
    assert said in _refused({**env, **change})


def test_a_malformed_temporal_config_file_is_refused_without_its_contents(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(f'[profile.default]\napi_key = "{SECRET}\n')  # an unterminated string
    message = _refused({"TEMPORAL_CONFIG_FILE": str(config)})
    assert f"TEMPORAL_CONFIG_FILE: {config} is not a valid Temporal configuration file (TOML)" in message


def test_the_default_temporal_file_is_read_only_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's CLI profile (``~/.config/temporalio/temporal.toml``) must not point the local stack at
    another Temporal unless ``TEMPORAL_PROFILE`` or ``TEMPORAL_CONFIG_FILE`` asks for it."""
    home = tmp_path / "home"
    (home / ".config" / "temporalio").mkdir(parents=True)
    (home / ".config" / "temporalio" / "temporal.toml").write_text('[profile.default]\naddress = "cloud:7233"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    assert Settings.from_env({"TEMPORAL_NAMESPACE": "dev"}).embedded_temporal
    assert Settings.from_env({"TEMPORAL_PROFILE": "default"}).temporal_target == "cloud:7233"


def test_temporal_names_are_not_unknown_erasure_settings() -> None:
    s = Settings.from_env({"TEMPORAL_DB_PASSWORD": "x", "TEMPORAL_CODEC_ENDPOINT": "https://c/codec"})
    assert s.embedded_temporal


def test_messages_name_variables_in_order_of_the_settings(tmp_path: Path) -> None:
    message = _refused({"ERASURE_S3_ENDPOINT": "s3", "ERASURE_KMS_ENDPOINT": "kms"})
    assert re.search(r"ERASURE_S3_ENDPOINT .*; ERASURE_KMS_ENDPOINT ", message), message

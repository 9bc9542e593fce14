"""The checks of single values: URLs (an allowed scheme, a host, a port in 1..65535), lists of URLs, trusted
proxy networks, the database URL, the Temporal address and PEM files (``workers/config_checks.py``). Each
problem becomes a ``ValueError`` worded to follow the variable's name; secrets' values are never shown."""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import SecretStr, ValidationInfo, field_validator

from workers import config_checks
from workers.settings.accessors import Accessors

_HTTP = frozenset({"http", "https"})

#: URL field -> how ``config_checks.url_problem`` checks it (``oidc_issuer``: https, http in local mode only)
URL_RULES: dict[str, dict[str, Any]] = {
    "s3_endpoint": {"schemes": _HTTP, "words": ("aws",)},
    "kms_endpoint": {"schemes": _HTTP, "words": ("aws",)},
    "s3_compaction_url": {
        "schemes": _HTTP,
        "words": ("none",),
        "origin_only": True,
        "expected": "the SeaweedFS master's http(s) URL or 'none'",
    },
    "s3_compaction_filer_url": {
        "schemes": _HTTP,
        "words": ("none",),
        "origin_only": True,
        "expected": "the SeaweedFS filer's http(s) URL or 'none'",
    },
    "temporal_ui_url": {"schemes": _HTTP},
    "temporal_ui_upstream": {"schemes": _HTTP, "words": ("none",)},
    "console_url": {"schemes": _HTTP},
    "trace_otlp_endpoint": {"schemes": _HTTP},
    "oidc_issuer": {"schemes": _HTTP},
    "cache_url": {
        "schemes": frozenset({"redis", "rediss", "valkey", "valkeys", "unix"}),
        "words": ("none",),
        "hostless_schemes": ("unix",),
        "secret": True,
    },
    "smtp_url": {"schemes": frozenset({"smtp", "smtps"}), "secret": True},
}

#: comma-separated URL fields -> how each entry is checked
URL_LIST_RULES: dict[str, dict[str, Any]] = {
    "webhook_urls": {"schemes": _HTTP},
    "callback_allowed_urls": {"schemes": _HTTP, "no_user_or_query": True},
    "codec_allowed_origins": {"schemes": _HTTP, "origin_only": True},
}

#: fields naming PEM files: certificates (a CA bundle or one certificate) and the private key
CERTIFICATE_FILES = ("temporal_tls_ca_file", "temporal_tls_cert_file", "aws_ca_bundle", "database_sslrootcert")
KEY_FILES = ("temporal_tls_key_file",)


class Checked(Accessors):
    """The settings with their values checked, one field validator per kind of value."""

    @field_validator(*URL_RULES, mode="after")
    @classmethod
    def _url(cls, value: str | SecretStr, info: ValidationInfo) -> str | SecretStr:
        name = str(info.field_name)
        rule = dict(URL_RULES[name])
        if name == "oidc_issuer" and info.data.get("mode") == "production":
            rule.update(schemes=frozenset({"https"}), expected="an https URL (production mode)")
        plain = value.get_secret_value() if isinstance(value, SecretStr) else value
        problem = config_checks.url_problem(plain, **rule)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator(*URL_LIST_RULES, mode="after")
    @classmethod
    def _url_list(cls, value: str, info: ValidationInfo) -> str:
        rule = URL_LIST_RULES[str(info.field_name)]
        entries = [e.strip() for e in value.split(",") if e.strip()]
        problems = [p for p in (config_checks.url_problem(e, **rule) for e in entries) if p]
        if problems:
            raise ValueError(f"entries {' and '.join(problems)}" if len(problems) > 1 else f"entry {problems[0]}")
        return value

    @field_validator("console_trusted_proxies", mode="after")
    @classmethod
    def _networks(cls, value: str) -> str:
        for entry in (e.strip() for e in value.split(",")):
            try:
                if entry:
                    ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (CIDR)") from None
        return value

    @field_validator("database_url", "console_database_url", mode="after")
    @classmethod
    def _database_url(cls, value: SecretStr) -> SecretStr:
        plain = value.get_secret_value()
        if plain and "://" not in plain and "=" not in plain:
            raise ValueError("must be a postgresql:// URL or a key=value connection string")
        problem = config_checks.url_problem(
            plain if "://" in plain else "", schemes={"postgresql", "postgres"}, host_required=False, secret=True
        )
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("temporal_address", mode="after")
    @classmethod
    def _address(cls, value: str) -> str:
        problem = config_checks.address_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator(*CERTIFICATE_FILES, *KEY_FILES, mode="after")
    @classmethod
    def _pem_file(cls, value: str, info: ValidationInfo) -> str:
        if info.field_name in KEY_FILES:
            problem = config_checks.pem_private_key_problem(value)
        else:  # libpq's sslrootcert=system: the system's trust store
            words = ("system",) if info.field_name == "database_sslrootcert" else ()
            problem = config_checks.pem_certificates_problem(value, words=words)
        if problem:
            raise ValueError(problem)
        return value

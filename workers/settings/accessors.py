"""What is derived from the settings: endpoints (the local stack's when none is given), ports, windows and
the settings as environment variables for a child process."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlsplit

from workers.settings.console import ConsoleSettings
from workers.settings.erasure import ErasureSettings
from workers.settings.names import SECRET_FILES, var
from workers.settings.observability import ObservabilitySettings
from workers.settings.schedules import ScheduleSettings
from workers.settings.secrets import SecretSettings
from workers.settings.stack import StackSettings
from workers.settings.storage import StorageSettings
from workers.settings.stores import PlatformStoreSettings

#: the login the local stack creates for the console (``workers.stack.console_login``): a member of
#: ``erasure_console_rights`` (migration 0052) and nothing else
CONSOLE_LOGIN = "erasure_console"


class Fields(
    ScheduleSettings,
    ObservabilitySettings,
    SecretSettings,
    ErasureSettings,
    ConsoleSettings,
    PlatformStoreSettings,
    StorageSettings,
    StackSettings,
):
    """Every setting, by area. Listed last area first: pydantic orders the fields from the last base to the
    first, so the fields (and docs/configuration.md, generated in field order) read stack, storage, stores,
    console, erasure, secrets, observability, schedules."""


class Accessors(Fields):
    """Typed accessors deriving endpoints, ports and windows from the fields."""

    @property
    def production(self) -> bool:
        return self.mode == "production"

    @property
    def physical_window(self) -> timedelta:
        """The physical clean-up window (ERASURE_PHYSICAL_WINDOW_MINUTES; 24 h in production, 5 min locally)."""
        minutes = self.physical_window_minutes or (1440.0 if self.production else 5.0)
        return timedelta(minutes=minutes)

    @property
    def physical_interval(self) -> timedelta:
        """How often the physical job runs (ERASURE_PHYSICAL_INTERVAL_MINUTES; a quarter of the window)."""
        if self.physical_interval_minutes:
            return timedelta(minutes=self.physical_interval_minutes)
        return max(self.physical_window / 4, timedelta(minutes=1))

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).resolve()

    @property
    def embedded_temporal(self) -> bool:
        return not self.temporal_address

    @property
    def embedded_postgres(self) -> bool:
        return not self.database_url.get_secret_value()

    @property
    def embedded_s3(self) -> bool:
        return not self.s3_endpoint

    @property
    def embedded_kms(self) -> bool:
        return not self.kms_endpoint

    @property
    def temporal_target(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self.temporal_port}"

    @property
    def ui_url(self) -> str:
        """Where people open Temporal UI: the configured URL, else the local UI behind the console."""
        if self.temporal_ui_url:
            return self.temporal_ui_url.rstrip("/")
        if self.ui_proxy_upstream is not None:
            return f"{self.console_base_url}/temporal"
        return self.local_ui_url

    @property
    def local_ui_url(self) -> str:
        """The local dev server's own UI (served under /temporal; payloads stay ciphertext there)."""
        return f"http://127.0.0.1:{self.temporal_ui_port}/temporal"

    @property
    def console_base_url(self) -> str:
        return (self.console_url or f"http://127.0.0.1:{self.serve_port}").rstrip("/")

    @property
    def ui_proxy_upstream(self) -> str | None:
        """The Temporal UI the console proxies at /temporal, or ``None``."""
        if self.temporal_ui_upstream == "none":
            return None
        if self.temporal_ui_upstream:
            return self.temporal_ui_upstream.rstrip("/")
        if self.production or not self.embedded_temporal:
            return None
        return f"http://127.0.0.1:{self.temporal_ui_port}"

    @property
    def codec_origins(self) -> frozenset[str]:
        """Browser origins allowed to call the console's codec endpoint."""
        given = {o.strip().rstrip("/") for o in self.codec_allowed_origins.split(",") if o.strip()}
        own = urlsplit(self.console_base_url)
        return frozenset({*given, f"{own.scheme}://{own.netloc}"})

    @property
    def local_idp_url(self) -> str:
        return f"http://127.0.0.1:{self.idp_port}"

    @property
    def postgres_url(self) -> str:
        """The database URL, with ``sslmode`` and ``sslrootcert`` from their settings added as libpq URL
        parameters (so the pool, migrations and google-adk's engine all connect the same way)."""
        return self._with_tls(
            self.database_url.get_secret_value() or f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres"
        )

    @property
    def console_login_url(self) -> str:
        """The console's own database login (ERASURE_CONSOLE_DATABASE_URL, without the TLS parameters
        ``postgres_url`` adds); with the embedded Postgres and none given, the local stack's passwordless
        ``CONSOLE_LOGIN`` on it (the embedded server trusts local users); otherwise empty: none is known."""
        url = self.console_database_url.get_secret_value()
        if url or not self.embedded_postgres:
            return url
        return f"postgresql://{CONSOLE_LOGIN}@127.0.0.1:{self.pg_port}/postgres"

    def _with_tls(self, url: str) -> str:
        """``url`` with the ``sslmode`` and ``sslrootcert`` settings added as libpq parameters."""
        params = {"sslmode": self.database_sslmode, "sslrootcert": self.database_sslrootcert}
        given = {k: v for k, v in params.items() if v}
        if not given:
            return url
        if not url.startswith(("postgresql://", "postgres://")):  # key=value conninfo
            return " ".join([url, *(f"{k}='{v}'" for k, v in given.items())])
        extra = "&".join(f"{k}={quote(v, safe='/')}" for k, v in given.items())
        return f"{url}{'&' if '?' in url else '?'}{extra}"

    @property
    def s3_url(self) -> str | None:
        """Endpoint for boto3: ``None`` means AWS's own."""
        if self.s3_endpoint == "aws":
            return None
        return self.s3_endpoint or f"http://127.0.0.1:{self.s3_port}"

    @property
    def s3_compaction_master(self) -> str | None:
        """The SeaweedFS master that compacts volumes; ``None`` when the object store offers no compaction.

        The local stack's ``weed server`` puts its master on the port after the S3 gateway's (``S3Part``)."""
        if self.s3_compaction_url == "none":
            return None
        if self.s3_compaction_url:
            return self.s3_compaction_url.rstrip("/")
        if self.production or not self.embedded_s3:
            return None
        return f"http://127.0.0.1:{self.s3_port + 1}"

    @property
    def s3_compaction_filer(self) -> str | None:
        """The SeaweedFS filer whose deletion queue the compaction waits on; ``None``: a fixed wait instead.

        Only with a compacting master; the local stack's filer is on the S3 port + 5 (``S3Part``)."""
        if self.s3_compaction_filer_url == "none" or self.s3_compaction_master is None:
            return None
        if self.s3_compaction_filer_url:
            return self.s3_compaction_filer_url.rstrip("/")
        if self.s3_compaction_url or self.production or not self.embedded_s3:
            return None
        return f"http://127.0.0.1:{self.s3_port + 5}"

    @property
    def embedded_cache(self) -> bool:
        return not self.production and not self.cache_url.get_secret_value()

    @property
    def response_cache_url(self) -> str | None:
        """The response cache's URL; ``None`` when the platform has none (its adapter is left out)."""
        url = self.cache_url.get_secret_value()
        if url == "none" or (not url and self.production):
            return None
        return url or f"redis://127.0.0.1:{self.cache_port}/0"

    @property
    def chroma_memory_path(self) -> str | None:
        """The Chroma backend's directory; ``None`` when the platform has none (its adapter is left out)."""
        if self.chroma_path == "none" or (not self.chroma_path and self.production):
            return None
        if self.chroma_path:
            return str(Path(self.chroma_path).resolve())
        if importlib.util.find_spec("chromadb") is None:
            return None
        return str(self.state_path / "chroma")

    @property
    def kms_url(self) -> str | None:
        if self.kms_endpoint == "aws":
            return None
        return self.kms_endpoint or f"http://127.0.0.1:{self.kms_port}"

    @property
    def ingestion_delay(self) -> int:
        return self.ingestion_delay_seconds

    @property
    def due_days_int(self) -> int:
        return self.due_days

    @property
    def ports(self) -> dict[str, int]:
        return {
            "temporal": self.temporal_port,
            "temporal-ui": self.temporal_ui_port,
            "postgres": self.pg_port,
            "s3": self.s3_port,
            "kms": self.kms_port,
            "cache": self.cache_port,
            "idp": self.idp_port,
            "console": self.serve_port,
        }

    @property
    def sweep_interval(self) -> int:
        return self.sweep_interval_minutes

    @property
    def sweep_lookback(self) -> int:
        return self.sweep_lookback_hours

    @property
    def expiry_interval(self) -> int:
        return self.expiry_interval_minutes

    @property
    def chaos_pause_seconds(self) -> float:
        return self.chaos_pause_ms / 1000.0

    @property
    def metrics_port_int(self) -> int:
        return self.metrics_port

    @property
    def traces_to(self) -> str:
        """Where spans go (``ERASURE_TRACE_EXPORTER``, its default resolved): none, console or otlp."""
        return self.trace_exporter or ("console" if self.production else "none")

    def env(self) -> dict[str, str]:
        """The settings as environment variables (to hand to child processes).

        Secrets are given by value (a child must not depend on the parent's files), so every ``*_FILE``
        variable is emptied."""
        result = {var(name): _env_value(self._plain(name)) for name in type(self).model_fields}
        result.update({var(file_field): "" for file_field in SECRET_FILES.values()})
        result.update({var(secret): self.secret_value(secret) for secret in SECRET_FILES})
        return result


def _env_value(value: str) -> str:
    return {"True": "true", "False": "false"}.get(value, value)

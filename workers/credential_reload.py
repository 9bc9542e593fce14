"""Temporal credentials re-read when their files change: a certificate or API key rotated without a restart.

A Kubernetes secret volume (or cert-manager's renewal, or Vault's agent) replaces the files in place; a
worker that read them once would keep presenting the old certificate until it expired. The worker polls the
files' contents every ``POLL`` seconds:

- a TLS file changed (CA, client certificate or key): a new connection is made with ``connect`` (which reads
  the files again) and handed to the running worker (``Worker.client``: the SDK's own way to swap a
  worker's client; calls in flight finish on the old one);
- only the API key file changed: the client's key is replaced in place (``Client.api_key``: sent with the
  next call);
- a client-credentials token (``workers.temporal_token``) is due: the next one is fetched and replaced in
  place the same way (the poll then comes no later than the token is due).

A file caught half-written, a certificate that does not load or a server that refuses it changes nothing:
the current connection stays, the failure is logged by variable name (never a file's contents), and the
next poll tries again. Nothing here reads or logs a key's value beyond handing it to the SDK.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog
from temporalio.client import Client
from temporalio.worker import Worker

from workers.errors import ConfigError
from workers.local_secrets import Secrets
from workers.settings import Settings
from workers.temporal_client import TemporalUnreachable, connect, oauth_credentials, temporal_api_key
from workers.temporal_token import TokenRefused, TokenSource, token_source

log = structlog.get_logger("workers.credential_reload")

POLL = 30.0  # seconds between two reads of the files

Outcome = Literal["unchanged", "reconnected", "api_key", "failed"]


def _digest(paths: tuple[str, ...]) -> str:
    """A digest of the files' contents ('' for none); an unreadable file counts as its own state."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode() + b"\0")
        try:
            h.update(Path(path).read_bytes())
        except OSError as exc:
            h.update(f"unreadable:{type(exc).__name__}".encode())
        h.update(b"\0")
    return h.hexdigest() if paths else ""


@dataclass(frozen=True)
class CredentialFiles:
    tls: tuple[str, ...]
    api_key: tuple[str, ...]

    @classmethod
    def of(cls, settings: Settings) -> CredentialFiles:
        tls = tuple(
            p
            for p in (settings.temporal_tls_ca_file, settings.temporal_tls_cert_file, settings.temporal_tls_key_file)
            if p
        )
        return cls(tls, (settings.temporal_api_key_file,) if settings.temporal_api_key_file else ())

    @property
    def any(self) -> bool:
        return bool(self.tls or self.api_key)


class TemporalCredentials:
    """The process's Temporal client, kept on the credentials its files hold now (``refresh``, ``watch``)."""

    def __init__(self, settings: Settings, secrets: Secrets, client: Client, *, metrics_port: int = 0) -> None:
        self.settings = settings
        self.secrets = secrets
        self.client = client
        self.metrics_port = metrics_port
        self.files = CredentialFiles.of(settings)
        self._tls = _digest(self.files.tls)
        self._api_key = _digest(self.files.api_key)
        self.tokens: TokenSource | None = token_source(oauth_credentials(settings))

    async def refresh(
        self, worker: Worker | Sequence[Worker] | None = None, on_client: Callable[[Client], None] | None = None
    ) -> Outcome:
        """Read the files once; reconnect or replace the key if they changed (see the module). ``worker``:
        the process's worker, or its workers (the erasure's and the physical job's), given the new client."""
        tls, api_key = _digest(self.files.tls), _digest(self.files.api_key)
        if tls != self._tls:
            try:
                client = await connect(self.settings, self.secrets, metrics_port=self.metrics_port)
            except (ConfigError, TemporalUnreachable) as exc:
                log.warning("temporal_credentials_not_reloaded", files="tls", reason=str(exc)[:300])
                return "failed"
            self.client, self._tls, self._api_key = client, tls, api_key
            for each in () if worker is None else (worker,) if isinstance(worker, Worker) else worker:
                each.client = client
            if on_client is not None:  # a holder of the client that is no worker (the console)
                on_client(client)
            log.info("temporal_credentials_reloaded", files="tls", reconnected=True)
            return "reconnected"
        if api_key != self._api_key:
            try:
                key = temporal_api_key(self.settings)
            except ConfigError as exc:
                log.warning("temporal_credentials_not_reloaded", files="api_key", reason=str(exc)[:300])
                return "failed"
            self.client.api_key = key
            self._api_key = api_key
            log.info("temporal_credentials_reloaded", files="api_key", reconnected=False)
            return "api_key"
        if self.tokens is not None and self.tokens.due():
            try:
                self.client.api_key = await self.tokens.fetch()
            except TokenRefused as exc:
                log.warning("temporal_credentials_not_reloaded", files="oauth_token", reason=str(exc)[:300])
                return "failed"
            log.info("temporal_credentials_reloaded", files="oauth_token", reconnected=False)
            return "api_key"
        return "unchanged"

    def _next_poll(self, every: float) -> float:
        """Seconds to the next poll: ``every``, or sooner when the token is due sooner (at least a second)."""
        if self.tokens is None:
            return every
        return max(1.0, min(every, self.tokens.seconds_until_due()))

    async def watch(
        self,
        worker: Worker | Sequence[Worker] | None,
        stop: asyncio.Event,
        every: float = POLL,
        on_client: Callable[[Client], None] | None = None,
    ) -> None:
        """Refresh every ``every`` seconds until ``stop`` is set (nothing to watch: returns at once)."""
        if not self.files.any and self.tokens is None:
            return
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self._next_poll(every))
            except TimeoutError:
                try:
                    await self.refresh(worker, on_client)
                except Exception as exc:  # a poll that broke is never the reason the worker stops
                    log.warning("temporal_credentials_not_reloaded", files="any", reason=type(exc).__name__)

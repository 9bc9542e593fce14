"""The local stack's own processes, started after the stores are ready: identity provider, worker, console.

With them ``erasure stack up`` gives a person everything at once: the console to log into (demo logins from
the local identity provider), a worker that runs what they approve, and Temporal UI decoded behind the
console's login. Each runs from this virtual environment with the stack's settings; production runs the
same commands (``erasure worker``, ``erasure serve``) under its own supervisor and identity provider.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.request

from workers.local_idp import logins_path
from workers.settings import Settings
from workers.stack.parts import Part, find_binary
from workers.stack.process import ManagedProcess, port_answers


def _child_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The stack's settings for a child process (which runs in the run directory: paths made absolute)."""
    env = settings.env()
    env["ERASURE_STATE_DIR"] = str(settings.state_path)
    env.update(extra)
    return env


def _answers_http(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - the stack's own loopback URL
        return bool(reply.status == 200)


class IdentityProviderPart(Part):
    """The local OpenID Connect provider (``workers.local_idp``): the console's demo logins."""

    name = "idp"

    @property
    def embedded(self) -> bool:
        return not self.settings.production and not self.settings.oidc_issuer

    @property
    def endpoint(self) -> str:
        return self.settings.oidc_issuer or self.settings.local_idp_url

    def process(self) -> ManagedProcess:
        port = self.settings.idp_port
        argv = [
            sys.executable, "-m", "workers.local_idp",
            "--port", str(port),
            "--logins", str(logins_path(self.settings.state_path)),
            "--audience", self.settings.oidc_audience,
            "--roles-claim", self.settings.oidc_roles_claim,
            "--client-id", self.settings.oidc_client_id,
            "--redirect-uri", f"{self.settings.console_base_url}/auth/callback",
        ]  # fmt: skip
        return ManagedProcess(self.name, argv, self.run_dir, [port], env=_child_env(self.settings))

    def healthy(self) -> bool:
        return _answers_http(f"{self.endpoint}/.well-known/openid-configuration")


class WorkerPart(Part):
    """``erasure worker`` on the stack's task queue: runs what the console files and approves."""

    name = "worker"
    startup_timeout = 90.0

    @property
    def embedded(self) -> bool:
        return not self.settings.production

    @property
    def endpoint(self) -> str:
        return f"task queue {self.settings.task_queue}"

    def process(self) -> ManagedProcess:
        argv = [find_binary("erasure"), "worker"]
        return ManagedProcess(self.name, argv, self.run_dir, [], env=_child_env(self.settings))

    def healthy(self) -> bool:
        from workers.service import worker_polling
        from workers.temporal_client import connect

        async def probe() -> bool:
            return await worker_polling(await connect(self.settings), self.settings)

        return asyncio.run(asyncio.wait_for(probe(), 5))


class ConsolePart(Part):
    """``erasure serve``: the compliance console, its codec endpoint and Temporal UI behind its login."""

    name = "console"

    @property
    def embedded(self) -> bool:
        return not self.settings.production

    @property
    def endpoint(self) -> str:
        return self.settings.console_base_url

    def process(self) -> ManagedProcess:
        port = self.settings.serve_port
        issuer = self.settings.oidc_issuer or self.settings.local_idp_url
        argv = [find_binary("erasure"), "serve"]
        env = _child_env(self.settings, ERASURE_OIDC_ISSUER=issuer)
        return ManagedProcess(self.name, argv, self.run_dir, [port], env=env)

    def healthy(self) -> bool:
        return port_answers(self.settings.serve_port) and _answers_http(f"{self.endpoint}/healthz")


def app_parts(settings: Settings) -> list[Part]:
    """The stack's own processes (none in production, where a supervisor runs them)."""
    if settings.production:
        return []
    return [IdentityProviderPart(settings), WorkerPart(settings), ConsolePart(settings)]

"""A real local OpenID Connect issuer for the tests: the stack's own provider (``workers.local_idp``) served
from a uvicorn server in a thread, on a free port.

It serves discovery, JWKS, ``/authorize`` and ``/token`` (authorization code with PKCE S256: the code is
redeemed once, with the verifier whose challenge it was issued for), signs tokens with its current RSA key
(``mint``) and can rotate to a new key (``rotate``), so the console is tested against what a provider
really serves, not a mocked validator. In-process tests skip its login form: ``next_login`` says who the
next authorization logs in (the browser test uses the stack's provider and its form instead).
"""

from __future__ import annotations

import threading
import time

import uvicorn

from tests.stack_fixture import free_port_block
from workers.local_idp import LocalIdentityProvider, Login, new_key

AUDIENCE = "erasure-console"
__all__ = ["AUDIENCE", "LocalIssuer", "new_key"]


class LocalIssuer(LocalIdentityProvider):
    def __init__(self) -> None:
        self.port = free_port_block(1)
        super().__init__(f"http://127.0.0.1:{self.port}", audience=AUDIENCE, logins={})
        #: who the next /authorize logs in (the test sets it: no login form)
        self.next_login: tuple[str, list[str]] = ("nobody", [])
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="oidc-issuer", daemon=True)

    def login_for(self, _params: dict[str, str]) -> Login:
        sub, roles = self.next_login
        return Login(sub, "", tuple(roles), sub)

    def mint(self, sub: str, roles: list[str], **kwargs: object) -> str:
        kwargs.setdefault("email", sub)
        return super().mint(sub, roles, **kwargs)  # type: ignore[arg-type]

    def start(self) -> LocalIssuer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the local OIDC issuer did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

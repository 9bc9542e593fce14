"""When a client-credentials token is fetched again, and what a refusal says (``workers.temporal_token``)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from workers.errors import ConfigError
from workers.settings import Settings
from workers.temporal_client import oauth_credentials
from workers.temporal_token import ClientCredentials, TokenRefused, TokenSource

CREDENTIALS = ClientCredentials("https://idp.example/token", "erasure-worker", "s3cret")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def issuing(answers: list[httpx.Response]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    return httpx.MockTransport(handle), seen


def test_a_token_is_kept_until_a_quarter_of_its_lifetime_is_left_then_fetched_again() -> None:
    clock = Clock()
    transport, seen = issuing(
        [
            httpx.Response(200, json={"access_token": "one", "expires_in": 400}),
            httpx.Response(200, json={"access_token": "two", "expires_in": 400}),
        ]
    )
    source = TokenSource(CREDENTIALS, clock=clock, transport=transport)
    assert source.due()
    assert asyncio.run(source.token()) == "one"
    clock.now += 299
    assert not source.due()
    assert source.seconds_until_due() == pytest.approx(1)
    assert asyncio.run(source.token()) == "one"
    clock.now += 1
    assert source.due()
    assert asyncio.run(source.token()) == "two"
    assert len(seen) == 2
    assert seen[0].headers["authorization"].startswith("Basic ")
    assert seen[0].content == b"grant_type=client_credentials"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (httpx.Response(401, json={"error": "invalid_client", "error_description": "s3cret is wrong"}), "401"),
        (httpx.Response(200, json={"token_type": "Bearer"}), "no access_token"),
        (httpx.Response(200, text="<html>"), "no access_token"),
        (httpx.Response(200, json={"access_token": "", "expires_in": 60}), "empty or expired"),
        (httpx.Response(200, json={"access_token": "x", "expires_in": -5}), "empty or expired"),
    ],
)
def test_a_refusal_or_nonsense_raises_naming_the_endpoint_never_the_secret(answer: httpx.Response, said: str) -> None:
    transport, _ = issuing([answer])
    source = TokenSource(CREDENTIALS, transport=transport)
    with pytest.raises(TokenRefused) as refused:
        asyncio.run(source.fetch())
    assert said in str(refused.value)
    assert CREDENTIALS.token_url in str(refused.value)
    assert "s3cret" not in str(refused.value)
    assert "s3cret" not in repr(CREDENTIALS)
    assert source.due()  # nothing kept


def test_an_unreachable_endpoint_is_a_refusal() -> None:
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(TokenRefused, match="ConnectError"):
        asyncio.run(TokenSource(CREDENTIALS, transport=httpx.MockTransport(unreachable)).fetch())


BASE = {"ERASURE_TEMPORAL_OAUTH_TOKEN_URL": "https://idp.example/token"}


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"ERASURE_TEMPORAL_OAUTH_CLIENT_ID": "w"}, "need ERASURE_TEMPORAL_OAUTH_TOKEN_URL"),
        ({**BASE, "ERASURE_TEMPORAL_OAUTH_CLIENT_ID": "w"}, "go together"),
        ({**BASE, "ERASURE_TEMPORAL_UI_OAUTH_CLIENT_SECRET": "x"}, "go together"),
        ({"ERASURE_TEMPORAL_OAUTH_TOKEN_URL": "idp.example/token"}, "http(s) URL"),
        (
            {
                **BASE,
                "ERASURE_TEMPORAL_OAUTH_CLIENT_ID": "w",
                "ERASURE_TEMPORAL_OAUTH_CLIENT_SECRET": "x",
                "ERASURE_TEMPORAL_API_KEY": "k",
            },
            "not both",
        ),
    ],
)
def test_incomplete_oauth_settings_are_refused_at_start(env: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        Settings.from_env(env)


def test_the_console_reads_the_ui_login_apart_from_its_own() -> None:
    settings = Settings.from_env(
        {
            **BASE,
            "ERASURE_TEMPORAL_OAUTH_CLIENT_ID": "erasure-console",
            "ERASURE_TEMPORAL_OAUTH_CLIENT_SECRET": "a",
            "ERASURE_TEMPORAL_UI_OAUTH_CLIENT_ID": "temporal-ui",
            "ERASURE_TEMPORAL_UI_OAUTH_CLIENT_SECRET": "b",
        }
    )
    own, ui = oauth_credentials(settings), oauth_credentials(settings, ui=True)
    assert own is not None
    assert ui is not None
    assert (own.client_id, ui.client_id) == ("erasure-console", "temporal-ui")
    assert oauth_credentials(Settings.from_env({})) is None

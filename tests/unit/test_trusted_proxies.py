"""Issue 40 item 5: the console's client address is the socket peer unless the peer is a trusted proxy.

The login's rate limit used to key on ``X-Forwarded-For`` from any client: ``erasure serve`` ran uvicorn with
its defaults, which trust the header from 127.0.0.1 and rewrite the client from it, so a client on the host
(or every client behind a local ingress, sharing one bucket) chose its own address. Now uvicorn rewrites
nothing and the console reads the header only from the proxies ``ERASURE_CONSOLE_TRUSTED_PROXIES`` names,
taking the right-most address that is not itself a trusted proxy.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from console.commands import serve_config
from console.http_guards import RateLimit, TrustedProxies, client_address, parse_networks
from console.rate_limits import MemoryCounter, RateLimits
from workers.errors import ConfigError
from workers.settings import Settings


def _echo(request: Request) -> PlainTextResponse:
    client = request.client.host if request.client else "?"
    return PlainTextResponse(f"{client} {request.url.scheme}")


def _limited(trusted: str = "") -> Any:
    inner = Starlette(routes=[Route("/login", _echo)])
    limits = RateLimits(MemoryCounter(), b"k" * 32)  # the database's windows, in memory
    return TrustedProxies(RateLimit(inner, limits, per_minute=3, paths=("/login",)), trusted=parse_networks(trusted))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served() -> Iterator[str]:
    """The limited app under uvicorn, configured exactly as ``erasure serve`` configures it (no trusted proxy)."""
    settings = Settings.from_env({"ERASURE_SERVE_PORT": str(_free_port())})
    server = uvicorn.Server(serve_config(_limited(), "127.0.0.1", settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{settings.serve_port}"
    server.should_exit = True
    thread.join(10)


def test_a_local_client_rotating_x_forwarded_for_is_still_one_client_under_erasure_serve(served: str) -> None:
    with httpx.Client(base_url=served) as http:
        answers = [
            http.get("/login", headers={"X-Forwarded-For": f"198.51.100.{n}", "X-Forwarded-Proto": "https"})
            for n in range(5)
        ]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert answers[0].text == "127.0.0.1 http"  # uvicorn rewrote neither the client nor the scheme
    assert int(answers[3].headers["retry-after"]) > 0


async def _login(app: Any, peer: str, forwarded: str | None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    transport = httpx.ASGITransport(app=app, client=(peer, 4321))
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        return await http.get("/login", headers=headers)


def test_a_trusted_proxy_forwards_two_clients_into_two_buckets() -> None:
    app = _limited("10.0.0.0/8")

    async def run() -> tuple[list[int], list[int], str]:
        first = [(await _login(app, "10.1.2.3", "203.0.113.7")).status_code for _ in range(4)]
        second = [(await _login(app, "10.1.2.3", "6.6.6.6, 203.0.113.8")).status_code for _ in range(3)]
        seen = (await _login(app, "10.1.2.3", "6.6.6.6, 203.0.113.9, 10.9.9.9")).text
        return first, second, seen

    first, second, seen = asyncio.run(run())
    assert first == [200, 200, 200, 429]
    assert second == [200, 200, 200]  # another client behind the same proxy: a bucket of its own
    assert seen == "203.0.113.9 http"  # the right-most address that is not a trusted proxy; 6.6.6.6 is a claim


def test_an_untrusted_peer_cannot_name_its_address_in_process_either() -> None:
    app = _limited("10.0.0.0/8")

    async def run() -> list[int]:
        return [(await _login(app, "192.0.2.50", f"203.0.113.{n}")).status_code for n in range(4)]

    assert asyncio.run(run()) == [200, 200, 200, 429]


@pytest.mark.parametrize(
    ("peer", "forwarded", "expected"),
    [
        ("192.0.2.1", "203.0.113.5", "192.0.2.1"),  # not trusted: the header is ignored
        ("10.0.0.1", "203.0.113.5", "203.0.113.5"),
        ("10.0.0.1", "1.2.3.4, 203.0.113.5", "203.0.113.5"),  # the left is whatever the client wrote
        ("10.0.0.1", "203.0.113.5, 10.0.0.2", "203.0.113.5"),  # two proxies in a row
        ("10.0.0.1", "10.0.0.3, 10.0.0.2", "10.0.0.2"),  # every hop trusted: the nearest, never the client's word
        ("10.0.0.1", "", "10.0.0.1"),  # a trusted peer without the header is the client
        ("10.0.0.1", "not-an-address", "not-an-address"),  # an untrusted entry, whatever it says
        ("::1", "203.0.113.5", "203.0.113.5"),
        ("10.0.0.1", "[2001:db8::1]:443", "2001:db8::1"),
    ],
)
def test_the_client_is_the_right_most_untrusted_address(peer: str, forwarded: str, expected: str) -> None:
    trusted = parse_networks("10.0.0.0/8, ::1")
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    assert client_address(peer, headers, trusted) == expected


def test_trusting_every_peer_takes_the_address_the_proxy_saw_not_the_clients_claim() -> None:
    everyone = parse_networks("0.0.0.0/0, ::/0")  # deploy/k8s: only the ingress controller reaches the port
    headers = [(b"x-forwarded-for", b"1.2.3.4, 203.0.113.5")]  # 1.2.3.4: written by the client
    assert client_address("10.0.0.1", headers, everyone) == "203.0.113.5"


def test_several_x_forwarded_for_headers_read_as_one_list() -> None:
    trusted = parse_networks("10.0.0.0/8")
    headers = [(b"x-forwarded-for", b"6.6.6.6"), (b"x-forwarded-for", b"203.0.113.5")]
    assert client_address("10.0.0.1", headers, trusted) == "203.0.113.5"


def test_the_setting_is_a_list_of_networks_and_a_bad_one_is_named() -> None:
    assert Settings.from_env({}).console_trusted_proxies == ""  # default: no proxy trusted
    given = Settings.from_env({"ERASURE_CONSOLE_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"})
    assert [str(n) for n in parse_networks(given.console_trusted_proxies)] == ["10.0.0.0/8", "192.0.2.7/32"]
    with pytest.raises(ConfigError, match="ERASURE_CONSOLE_TRUSTED_PROXIES"):
        Settings.from_env({"ERASURE_CONSOLE_TRUSTED_PROXIES": "10.0.0.0/8, everyone"})

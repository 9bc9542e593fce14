"""Outbound callbacks only where configured (issue 27's SSRF finding), as pure logic on loopback names."""

from __future__ import annotations

import pytest

from stores.infra.outbound import OutboundRefused, check_callback, check_destination, parse_allowlist

ALLOW = parse_allowlist("https://hooks.example.com/ketch, http://127.0.0.1:8099")


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/ketch/status",
        "https://HOOKS.example.com/ketch",
        "http://127.0.0.1:8099/anything",
    ],
)
def test_callbacks_under_an_allowlist_entry_pass(url: str) -> None:
    check_callback(url, {"Authorization": "Bearer x"}, ALLOW)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata endpoint
        "https://hooks.example.com/ketchup",  # a path prefix is a whole segment
        "https://hooks.example.com/other",
        "http://hooks.example.com/ketch",  # another scheme
        "https://hooks.example.com.evil.example/ketch",
        "https://hooks.example.com@evil.example/ketch",  # user info naming the allowed host
        "http://127.0.0.1:8098/",  # another port than the entry names
        "file:///etc/passwd",
        "https://hooks.example.com/ketch#frag",
    ],
)
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(OutboundRefused, match="ERASURE_CALLBACK_ALLOWED_URLS"):
        check_callback(url, {}, ALLOW)


def test_only_the_fixed_headers() -> None:
    with pytest.raises(OutboundRefused, match="headers may only be authorization"):
        check_callback("http://127.0.0.1:8099/", {"Authorization": "x", "Metadata-Flavor": "Google"}, ALLOW)
    with pytest.raises(OutboundRefused):
        check_callback("http://127.0.0.1:8099/", {"Host": "internal"}, ALLOW)


def test_nothing_is_allowed_without_an_allowlist() -> None:
    with pytest.raises(OutboundRefused):
        check_callback("https://hooks.example.com/ketch", {}, ())


def test_a_name_resolving_to_a_private_address_is_refused_unless_the_address_is_named() -> None:
    check_destination("http://127.0.0.1:8099/x", ALLOW)  # the entry names the address itself
    with pytest.raises(OutboundRefused, match="non-public"):
        check_destination("http://localhost:8099/x", parse_allowlist("http://localhost:8099"))


def test_a_bad_allowlist_entry_is_a_clear_error() -> None:
    with pytest.raises(OutboundRefused, match="must be an http"):
        parse_allowlist("ftp://x.example")

"""Issue 12, item 16: the codec server decodes only for callers it trusts, and answers bad input with 400.

Runs ``erasure codec-server`` as a real process and talks HTTP to it (no stack needed: the codec needs
only the payload key)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from tests.stack_fixture import TEST_PAYLOAD_KEY, free_port_block
from workers.codec import EncryptionCodec

TOKEN = "t0k3n-" + "9" * 40
UI = "http://127.0.0.1:8233"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port_block(1)
    env = {
        **os.environ,
        "ERASURE_STATE_DIR": str(tmp_path_factory.mktemp("codec")),
        "ERASURE_PAYLOAD_KEY": TEST_PAYLOAD_KEY,
        "ERASURE_SUBJECT_KEY_SECRET": "11" * 32,
        "ERASURE_SIGNING_KEY": "22" * 32,
        "ERASURE_CODEC_TOKEN": TOKEN,
        "ERASURE_TEMPORAL_UI_URL": UI,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers.cli", "codec-server", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.options(f"{base}/decode", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def _encrypted(text: str) -> dict[str, object]:
    import asyncio

    payload = Payload(metadata={"encoding": b"json/plain"}, data=text.encode())
    [sealed] = asyncio.run(EncryptionCodec(bytes.fromhex(TEST_PAYLOAD_KEY)).encode([payload]))
    return json_format.MessageToDict(sealed)


def _auth(**extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "Origin": UI, **extra}


def test_decodes_for_the_ui_with_the_token(server: str) -> None:
    reply = httpx.post(f"{server}/decode", json={"payloads": [_encrypted('"hello"')]}, headers=_auth())
    assert reply.status_code == 200
    [payload] = reply.json()["payloads"]
    assert base64.b64decode(payload["data"]) == b'"hello"'
    assert reply.headers["access-control-allow-origin"] == UI


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": UI}, 401),  # no token
        ({"Origin": UI, "Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}, 403),  # another site's page
        ({"Authorization": f"Bearer {TOKEN}", "Origin": UI, "Host": "evil.example:8081"}, 400),  # DNS rebinding
    ],
)
def test_refuses_callers_it_does_not_trust(server: str, headers: dict[str, str], status: int) -> None:
    reply = httpx.post(f"{server}/decode", json={"payloads": [_encrypted('"secret"')]}, headers=headers)
    assert reply.status_code == status
    assert b"secret" not in reply.content


def test_no_encryption_oracle(server: str) -> None:
    reply = httpx.post(f"{server}/encode", json={"payloads": []}, headers=_auth())
    assert reply.status_code in (404, 405)


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"payloads": "x"}', b'{"payloads": [{"data": "%%%"}]}', b'{"payloads": [{"metadata": 5}]}'],
)
def test_bad_input_is_a_400_not_a_dropped_connection(server: str, body: bytes) -> None:
    reply = httpx.post(f"{server}/decode", content=body, headers={**_auth(), "Content-Type": "application/json"})
    assert reply.status_code == 400
    assert "error" in reply.json()

"""The local stack's AWS-KMS-compatible endpoint: moto's server with one persistent key.

moto keeps keys in memory and draws key material at random, so a restarted endpoint could no longer
unwrap the data keys wrapped before. This wrapper creates the configured key with a fixed id and key
material kept in the state directory (mode 0600), then serves moto's KMS API in the same process.
Keys created later through the API (per-user key mode) live only until the endpoint stops. Like AWS KMS
(and unlike moto alone), a key that is not Enabled (disabled, or pending deletion after a crypto-shred in
per-user key mode) refuses Encrypt, GenerateDataKey and Decrypt with ``KMSInvalidStateException``.

Run as ``python -m workers.local_kms --port P --state FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ACCOUNT_ID = "123456789012"


def load_or_create_key_state(path: Path) -> dict[str, str]:
    if path.exists():
        data: dict[str, str] = json.loads(path.read_text())
        return data
    data = {"key_id": str(uuid.uuid4()), "material": secrets.token_hex(32)}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    return data


def read_key_id(path: Path) -> str | None:
    if not path.exists():
        return None
    return str(json.loads(path.read_text())["key_id"])


def offline_wrapper(path: Path) -> Callable[[bytes], bytes]:
    """Wrap a data key as this endpoint's ``GenerateDataKey`` wraps it, without a request: moto's own
    ``encrypt`` under the key material recorded in the state file, no encryption context. ``Decrypt`` at the
    endpoint opens the result as any key it generated. Bulk seeding of the local stack only (its one KMS call a
    data key is the endpoint's cost, ~3 ms of CPU); a real KMS has no such shortcut: its key material never
    leaves it."""
    from moto.kms.utils import encrypt

    state: dict[str, str] = json.loads(path.read_text())  # FileNotFoundError where the local KMS never ran
    master = {state["key_id"]: SimpleNamespace(key_material=bytes.fromhex(state["material"]))}

    def wrap(plaintext: bytes) -> bytes:
        return bytes(encrypt(master, state["key_id"], plaintext, {}))

    return wrap


def _install_key(state: dict[str, str], region: str) -> None:
    from moto.kms.models import kms_backends

    backend: Any = kms_backends[ACCOUNT_ID][region]
    if state["key_id"] in backend.keys:
        return
    key = backend.create_key(
        policy=None,
        key_usage="ENCRYPT_DECRYPT",
        key_spec="SYMMETRIC_DEFAULT",
        description="erasure-orchestrator local wrapping key",
        tags=None,
    )
    # moto draws a random id and material: give the key its recorded id and material instead.
    del backend.keys[key.id]
    key.arn = key.arn.replace(key.id, state["key_id"])
    key.id = state["key_id"]
    key.key_material = bytes.fromhex(state["material"])
    backend.keys[key.id] = key


def _enforce_key_state() -> None:
    """Refuse cryptographic use of a key that is not Enabled, as AWS KMS does."""
    from moto.core.exceptions import JsonRESTError
    from moto.kms.models import KmsBackend

    def refuse_unless_enabled(backend: Any, key_id: str) -> None:
        key = backend.keys[key_id]
        if key.key_state != "Enabled":
            raise JsonRESTError("KMSInvalidStateException", f"{key.arn} is {key.key_state.lower()}.")

    original_encrypt, original_decrypt = KmsBackend.encrypt, KmsBackend.decrypt

    def encrypt(self: Any, key_id: str, plaintext: bytes, encryption_context: dict[str, str]) -> Any:
        refuse_unless_enabled(self, self.any_id_to_key_id(key_id))
        return original_encrypt(self, key_id, plaintext, encryption_context)

    def decrypt(
        self: Any, ciphertext_blob: bytes, encryption_context: dict[str, str], key_id: str | None = None
    ) -> Any:
        plaintext, arn = original_decrypt(self, ciphertext_blob, encryption_context, key_id)
        refuse_unless_enabled(self, self.any_id_to_key_id(arn))
        return plaintext, arn

    KmsBackend.encrypt = encrypt  # type: ignore[method-assign]
    KmsBackend.decrypt = decrypt  # type: ignore[method-assign]


def _keep_epoch_keys(path: Path, region: str) -> None:
    """Wrapping-key epoch keys (tag ``erasure:key-epoch``, ``stores.privacy.key_epochs``) outlive a restart, as
    the configured key does: their id, material and state are kept in ``path`` (mode 0600) and installed again
    at start; a key scheduled for deletion stays refused."""
    from moto.kms.models import KmsBackend, kms_backends

    kept: dict[str, dict[str, str]] = json.loads(path.read_text()) if path.exists() else {}
    backend: Any = kms_backends[ACCOUNT_ID][region]
    for key_id, held in kept.items():
        key = backend.create_key(None, "ENCRYPT_DECRYPT", "SYMMETRIC_DEFAULT", "erasure-orchestrator key epoch", None)
        del backend.keys[key.id]
        key.arn, key.id = key.arn.replace(key.id, key_id), key_id
        key.key_material = bytes.fromhex(held["material"])
        key.key_state, key.enabled = held["state"], held["state"] == "Enabled"
        backend.keys[key_id] = key
    lock = threading.Lock()

    def save(key: Any) -> None:
        with lock:
            kept[key.id] = {"material": bytes(key.key_material).hex(), "state": key.key_state}
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(kept, fh)

    original_create, original_schedule = KmsBackend.create_key, KmsBackend.schedule_key_deletion

    def create_key(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = original_create(self, *args, **kwargs)
        tags = kwargs.get("tags") if "tags" in kwargs else (args[4] if len(args) > 4 else None)
        if any(t.get("TagKey") == "erasure:key-epoch" for t in tags or []):
            save(key)
        return key

    def schedule_key_deletion(self: Any, key_id: str, pending_window_in_days: int) -> Any:
        out = original_schedule(self, key_id, pending_window_in_days)
        if key_id in kept:
            save(self.keys[key_id])
        return out

    KmsBackend.create_key = create_key  # type: ignore[method-assign]
    KmsBackend.schedule_key_deletion = schedule_key_deletion  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args()

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    from moto.server import ThreadedMotoServer

    state = load_or_create_key_state(args.state)
    _install_key(state, args.region)
    _enforce_key_state()
    _keep_epoch_keys(args.state.with_name(args.state.stem + "-epochs.json"), args.region)
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()

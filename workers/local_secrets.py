"""Secrets: from the environment in production, generated once into the state dir for the local stack.

The file is created with mode 0600 and lives under the state directory, which is git-ignored.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from workers.errors import ConfigError
from workers.settings import Settings

_LENGTHS = {"subject_key_secret": 32, "signing_key": 32, "payload_key": 32}
_ENV = {
    "subject_key_secret": "ERASURE_SUBJECT_KEY_SECRET",
    "signing_key": "ERASURE_SIGNING_KEY",
    "payload_key": "ERASURE_PAYLOAD_KEY",
}


@dataclass(frozen=True)
class Secrets:
    subject_key_secret: bytes
    signing_key: bytes
    payload_key: bytes


def secrets_file(settings: Settings) -> Path:
    return settings.state_path / "secrets.json"


def _parse(name: str, value: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ConfigError(f"{_ENV[name]} must be hex") from None
    if len(raw) != _LENGTHS[name]:
        raise ConfigError(f"{_ENV[name]} must be {_LENGTHS[name]} bytes ({2 * _LENGTHS[name]} hex digits)")
    return raw


def _load_or_create_file(path: Path) -> dict[str, str]:
    if path.exists():
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ConfigError(f"{path} is not a secrets file")
        missing = [k for k in _LENGTHS if k not in data]
        if not missing:
            return {k: str(v) for k, v in data.items()}
    else:
        data = {}
    for name, length in _LENGTHS.items():
        data.setdefault(name, secrets.token_hex(length))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    tmp.replace(path)
    return {k: str(v) for k, v in data.items()}


def load_secrets(settings: Settings) -> Secrets:
    values: dict[str, str] = {name: getattr(settings, name) for name in _LENGTHS}
    if not all(values.values()):
        stored = _load_or_create_file(secrets_file(settings))
        values = {name: values[name] or stored[name] for name in _LENGTHS}
    return Secrets(**{name: _parse(name, value) for name, value in values.items()})

"""Secrets: from their variables or ``*_FILE`` files (``workers/settings.py``), or the local secrets file.

In production mode (``ERASURE_MODE=production``) the local secrets file is never read nor created: the
settings already refused to start without every secret.

Nothing generates a secret on the side. ``create_local_secrets`` is called by ``erasure stack up`` (and the
test fixtures) only: it writes ``$ERASURE_STATE_DIR/secrets.json`` once, with ``O_EXCL | O_NOFOLLOW`` and
mode 0600. Every other command reads it with ``load_secrets`` and refuses a file that is missing, partial,
a symlink, not owned by this user, or readable by others: a CLI started in an unconfigured shell must fail
with a clear error, never compute subject keys under a secret of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
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
    #: retired payload keys, still decoding (``ERASURE_PAYLOAD_OLD_KEYS``; never in the local secrets file)
    payload_old_keys: tuple[bytes, ...] = ()

    def __repr__(self) -> str:
        return "Secrets(<redacted>)"


def secrets_file(settings: Settings) -> Path:
    return settings.state_path / "secrets.json"


def _parse(name: str, value: str, where: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ConfigError(f"{where} must be hex") from None
    if len(raw) != _LENGTHS[name]:
        raise ConfigError(f"{where} must be {_LENGTHS[name]} bytes ({2 * _LENGTHS[name]} hex digits)")
    return raw


def _read_file(path: Path) -> dict[str, str] | None:
    """The secrets file's values, ``None`` when it does not exist; refuses anything but our own private file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: the last component is a symlink
        raise ConfigError(f"{path} is a symlink; refusing to read secrets through it") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise ConfigError(f"{path} is owned by uid {info.st_uid}, not by this user; refusing it")
        if info.st_mode & 0o077:
            raise ConfigError(f"{path} has mode {info.st_mode & 0o777:o}; it must be 600 (chmod 600 {path})")
        try:
            data = json.loads(fh.read())
        except ValueError:
            raise ConfigError(f"{path} is not a secrets file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a secrets file")
    missing = [k for k in _LENGTHS if not isinstance(data.get(k), str)]
    if missing:
        raise ConfigError(f"{path} lacks {', '.join(missing)}; restore it from backup (it is never filled in)")
    return {k: str(data[k]) for k in _LENGTHS}


def create_local_secrets(settings: Settings) -> Secrets:
    """The local stack's secrets, generated into the state dir the first time (``erasure stack up``)."""
    if settings.production:
        raise ConfigError(
            "ERASURE_MODE=production never creates secrets: give them through their variables or *_FILE files"
        )
    path = secrets_file(settings)
    if _read_file(path) is None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        values = {name: secrets.token_hex(length) for name, length in _LENGTHS.items()}
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # created in between (another process), or a dangling symlink planted there
            if path.is_symlink():
                raise ConfigError(f"{path} is a symlink; refusing to write secrets through it") from None
        else:
            with os.fdopen(fd, "w") as fh:
                json.dump(values, fh)
    return load_secrets(settings)


def load_secrets(settings: Settings) -> Secrets:
    """Each secret from its variable, else from the local secrets file; a clear error when neither has it."""
    values: dict[str, str] = {name: settings.secret_value(name) for name in _LENGTHS}
    where = {name: settings.source_of(name) for name in _LENGTHS}
    if not all(values.values()) and settings.production:
        unset = next(_ENV[n] for n in _LENGTHS if not values[n])
        raise ConfigError(f"{unset} is not set (nor {unset}_FILE); production mode never reads a local secrets file")
    if not all(values.values()):
        path = secrets_file(settings)
        stored = _read_file(path)
        if stored is None:
            unset = next(_ENV[n] for n in _LENGTHS if not values[n])
            raise ConfigError(
                f"{unset} is not set and there is no local secrets file at {path}: set it (production), or run "
                "'erasure stack up' to create the local stack's secrets"
            )
        for name in _LENGTHS:
            if not values[name]:
                values[name], where[name] = stored[name], f"{name} in {path}"
    old_keys = tuple(bytes.fromhex(k) for k in settings.payload_old_key_list)  # checked by the settings
    return Secrets(
        **{name: _parse(name, value, where[name]) for name, value in values.items()}, payload_old_keys=old_keys
    )

"""Issue 12, items 14, 15 and 17: separated keys, secrets that are never silently generated, and every id
the platform can store accepted exactly."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest

from stores.books.requests import RequestStore
from stores.infra.errors import InvalidIdentifier
from stores.privacy.identity import decode_hex_id, subject_key, token_digest, validate_id
from workers.errors import ConfigError
from workers.local_secrets import create_local_secrets, load_secrets, secrets_file
from workers.settings import Settings

SECRET = bytes(range(32))


# ----- item 14: one secret, separated keys ---------------------------------------------------------------


def test_subject_keys_and_token_digests_do_not_use_the_raw_secret() -> None:
    """Before: both were HMACs keyed directly with the one secret (and the request store derived from it)."""
    raw_subject = "sk_" + hmac.new(SECRET, b"app\x00bob", hashlib.sha256).hexdigest()[:40]
    raw_token = hmac.new(SECRET, b"tok\x00" + b"inhaler", hashlib.sha256).hexdigest()[:32]
    assert subject_key(SECRET, "app", "bob") != raw_subject
    assert token_digest(SECRET, "inhaler") != raw_token


def test_the_three_derived_keys_differ() -> None:
    from stores.privacy.identity import derived_key

    keys = {derived_key(SECRET, label) for label in ("subject-key", "token-digest", "request-store")}
    assert len(keys) == 3
    assert SECRET not in keys
    store = RequestStore.__new__(RequestStore)
    RequestStore.__init__(store, pool=None, service_secret=SECRET)  # type: ignore[arg-type]
    assert store._key == derived_key(SECRET, "request-store")


# ----- item 15: secrets are never silently generated ------------------------------------------------------


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path / "state"), **env})


def test_an_unconfigured_shell_gets_a_clear_error_not_new_secrets(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    with pytest.raises(ConfigError, match="ERASURE_SUBJECT_KEY_SECRET is not set"):
        load_secrets(s)
    assert not secrets_file(s).exists()


def test_only_the_local_stack_creates_secrets_and_then_reads_the_same(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    created = create_local_secrets(s)
    assert load_secrets(s) == created
    assert create_local_secrets(s) == created  # idempotent: never regenerated
    assert secrets_file(s).stat().st_mode & 0o777 == 0o600


def test_a_partial_secrets_file_is_an_error_not_filled_in(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    path = secrets_file(s)
    path.parent.mkdir(parents=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b'{"subject_key_secret": "' + b"ab" * 32 + b'"}')
    os.close(fd)
    with pytest.raises(ConfigError, match="signing_key"):
        load_secrets(s)
    with pytest.raises(ConfigError, match="signing_key"):
        create_local_secrets(s)


def test_a_secrets_file_others_can_read_is_refused(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    create_local_secrets(s)
    secrets_file(s).chmod(0o644)
    with pytest.raises(ConfigError, match="mode"):
        load_secrets(s)


def test_a_symlinked_secrets_file_is_refused(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text("{}")
    secrets_file(s).parent.mkdir(parents=True)
    secrets_file(s).symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"symlink|not a regular file"):
        load_secrets(s)
    with pytest.raises(ConfigError, match=r"symlink|not a regular file"):
        create_local_secrets(s)
    assert elsewhere.read_text() == "{}"


# ----- item 17: every id the platform can store ----------------------------------------------------------


@pytest.mark.parametrize(
    "user_id",
    [
        " bob",  # surrounding whitespace: google-adk stores it as given
        "bob\u00a0",  # a non-breaking space
        "bell\x07",  # a control character Postgres text can hold
        "new\U0001fae8",  # a code point newer than this Python's Unicode tables
        "line\u2028sep",
    ],
)
def test_ids_the_platform_can_store_are_accepted_exactly(user_id: str) -> None:
    assert validate_id(user_id) == user_id
    assert subject_key(SECRET, "app", user_id).startswith("sk_")  # before: InvalidIdentifier, never erasable
    trimmed = user_id.strip()
    if trimmed != user_id:  # exact: the trimmed id is another subject
        assert subject_key(SECRET, "app", user_id) != subject_key(SECRET, "app", trimmed)


@pytest.mark.parametrize(
    ("user_id", "message"),
    [("", "empty"), ("a\x00b", "NUL"), ("x" * 300, "longer than 256"), ("\ud800", "surrogate")],
)
def test_ids_no_store_can_hold_are_refused(user_id: str, message: str) -> None:
    with pytest.raises(InvalidIdentifier, match=message):
        validate_id(user_id)


def test_hex_form_gives_the_exact_id() -> None:
    assert decode_hex_id(" bob\u00a0".encode().hex()) == " bob\u00a0"
    with pytest.raises(InvalidIdentifier, match="hex"):
        decode_hex_id("zz")
    with pytest.raises(InvalidIdentifier, match="UTF-8"):
        decode_hex_id("ff")

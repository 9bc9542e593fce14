"""Payload-key rotation (issue 31 item 3): encode under the current key, decode under any listed key.

A payload sealed under the old key decodes after the rotation while the old key is listed in
``ERASURE_PAYLOAD_OLD_KEYS``; nothing decodes once it is removed from the list; a payload under a key nobody
listed is refused naming its key id (never the key). The settings check the list and read it from a file.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

from workers.codec import ENCODING, EncryptionCodec, UnknownPayloadKey, data_converter
from workers.errors import ConfigError
from workers.local_secrets import load_secrets
from workers.settings import Settings

OLD, NEW, OTHER = bytes.fromhex("0a" * 32), bytes.fromhex("0b" * 32), bytes.fromhex("0c" * 32)


def _seal(codec: EncryptionCodec, text: bytes) -> Payload:
    [sealed] = asyncio.run(codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=text)]))
    return sealed


def _open(codec: EncryptionCodec, payload: Payload) -> bytes:
    [opened] = asyncio.run(codec.decode([payload]))
    return opened.data


def test_a_payload_sealed_under_the_old_key_decodes_after_rotation() -> None:
    sealed = _seal(EncryptionCodec(OLD), b'"held since last year"')
    rotated = EncryptionCodec(NEW, [OLD], strict=True)
    assert _open(rotated, sealed) == b'"held since last year"'


def test_encoding_after_rotation_uses_the_current_key_only() -> None:
    rotated = EncryptionCodec(NEW, [OLD], strict=True)
    sealed = _seal(rotated, b'"new"')
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata["encryption-key-id"].decode() == EncryptionCodec.key_id(NEW)
    assert rotated.key_ids == [EncryptionCodec.key_id(NEW), EncryptionCodec.key_id(OLD)]
    assert _open(EncryptionCodec(NEW), sealed) == b'"new"'  # the new key alone opens what is written now


def test_nothing_sealed_under_the_old_key_decodes_once_it_is_removed() -> None:
    sealed = _seal(EncryptionCodec(OLD), b'"x"')
    with pytest.raises(UnknownPayloadKey, match=EncryptionCodec.key_id(OLD)):
        _open(EncryptionCodec(NEW, strict=True), sealed)
    with pytest.raises(UnknownPayloadKey):  # the lenient codec (Temporal UI's decode) refuses it too
        _open(EncryptionCodec(NEW), sealed)


def test_an_unknown_key_id_fails_clearly_naming_ids_never_keys() -> None:
    sealed = _seal(EncryptionCodec(OTHER), b'"x"')
    with pytest.raises(UnknownPayloadKey) as caught:
        _open(EncryptionCodec(NEW, [OLD], strict=True), sealed)
    message = str(caught.value)
    assert EncryptionCodec.key_id(OTHER) in message
    assert "ERASURE_PAYLOAD_OLD_KEYS" in message
    assert EncryptionCodec.key_id(NEW) in message
    assert EncryptionCodec.key_id(OLD) in message
    for key in (OLD, NEW, OTHER):
        assert key.hex() not in message


def test_the_data_converter_decodes_with_the_old_keys() -> None:
    value = {"request_id": "r-1"}
    [sealed] = asyncio.run(data_converter(OLD).encode([value]))
    assert asyncio.run(data_converter(NEW, [OLD]).decode([sealed])) == [value]
    with pytest.raises(UnknownPayloadKey):
        asyncio.run(data_converter(NEW).decode([sealed]))


def test_old_keys_come_from_the_setting_or_its_file(tmp_path: Path) -> None:
    env = {"ERASURE_STATE_DIR": str(tmp_path), "ERASURE_PAYLOAD_KEY": NEW.hex()}
    env.update(ERASURE_SUBJECT_KEY_SECRET="11" * 32, ERASURE_SIGNING_KEY="22" * 32)
    assert load_secrets(Settings.from_env(env)).payload_old_keys == ()
    listed = load_secrets(Settings.from_env({**env, "ERASURE_PAYLOAD_OLD_KEYS": f"{OLD.hex()}, {OTHER.hex()}"}))
    assert listed.payload_old_keys == (OLD, OTHER)
    (tmp_path / "old-keys").write_text(OLD.hex() + "\n")
    from_file = load_secrets(Settings.from_env({**env, "ERASURE_PAYLOAD_OLD_KEYS_FILE": str(tmp_path / "old-keys")}))
    assert from_file.payload_old_keys == (OLD,)
    assert OLD.hex() not in repr(Settings.from_env({**env, "ERASURE_PAYLOAD_OLD_KEYS": OLD.hex()}))


@pytest.mark.parametrize("value", ["abc", f"{OLD.hex()},zz", OLD.hex() + "00"])
def test_a_malformed_old_key_is_refused_by_position_without_its_value(value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("ERASURE_PAYLOAD_OLD_KEYS: key ")) as caught:
        Settings.from_env({"ERASURE_PAYLOAD_OLD_KEYS": value})
    assert value not in str(caught.value)


def test_a_versioned_worker_needs_both_settings() -> None:
    from workers.versioning import deployment_config

    with pytest.raises(ConfigError, match="ERASURE_WORKER_BUILD_ID needs ERASURE_WORKER_DEPLOYMENT_NAME"):
        Settings.from_env({"ERASURE_WORKER_BUILD_ID": "v2"})
    named = Settings.from_env({"ERASURE_WORKER_DEPLOYMENT_NAME": "erasure"})  # the console and the CLI: fine
    with pytest.raises(ConfigError, match="ERASURE_WORKER_BUILD_ID is not"):  # a worker: refused
        deployment_config(named)


def test_worker_versioning_settings_make_the_deployment_config() -> None:
    from temporalio.common import VersioningBehavior

    from workers.versioning import deployment_config

    assert deployment_config(Settings.from_env({})) is None
    config = deployment_config(
        Settings.from_env({"ERASURE_WORKER_DEPLOYMENT_NAME": "erasure", "ERASURE_WORKER_BUILD_ID": "2026.12.1"})
    )
    assert config is not None
    assert config.version.to_canonical_string() == "erasure.2026.12.1"
    assert config.use_worker_versioning
    assert config.default_versioning_behavior == VersioningBehavior.PINNED
    with pytest.raises(ConfigError, match=re.escape("must not contain '.'")):
        Settings.from_env({"ERASURE_WORKER_DEPLOYMENT_NAME": "erasure.eu", "ERASURE_WORKER_BUILD_ID": "1"})


def test_no_workflow_names_a_versioning_behavior_of_its_own() -> None:
    """The worker's default decides (pinned); an annotation would make the server refuse every workflow task
    an unversioned worker completes (the local stack, the tests, compose)."""
    from temporalio.common import VersioningBehavior
    from temporalio.workflow import _Definition

    from workers.worker import workflows

    for cls in workflows():
        defn = _Definition.must_from_class(cls)
        assert defn.versioning_behavior == VersioningBehavior.UNSPECIFIED, defn.name

"""The local stack's port settings never claim the same port twice (issue 42 item 4).

SeaweedFS takes ``ERASURE_S3_PORT`` and the seven ports after it. Before this check a block overlapping another
port setting started one part and then failed the next with "already in use by another program", blaming
something that was the stack itself. Now the settings are refused when built, naming both settings and the port.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workers.errors import ConfigError
from workers.settings import Settings
from workers.stack.app_parts import app_parts
from workers.stack.parts import all_parts


def _refusal(env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_s3_block_overlapping_the_console_names_both_settings_and_the_port() -> None:
    # 8083..8090: the console's 8088 is the S3 gateway's port + 5 (the filer), the identity provider's 8090 its + 7
    message = _refusal({"ERASURE_S3_PORT": "8083"})
    assert "ERASURE_S3_PORT" in message
    assert "ERASURE_SERVE_PORT" in message
    assert re.search(r"\b8088\b", message), message
    assert "another program" not in message


def test_two_single_ports_on_one_port() -> None:
    message = _refusal({"ERASURE_KMS_PORT": "4700", "ERASURE_CACHE_PORT": "4700"})
    assert "ERASURE_KMS_PORT" in message
    assert "ERASURE_CACHE_PORT" in message
    assert "4700" in message


def test_a_metrics_port_inside_the_s3_block() -> None:
    message = _refusal({"ERASURE_METRICS_PORT": "8335"})  # the default S3 block is 8333..8340
    assert "ERASURE_METRICS_PORT" in message
    assert "ERASURE_S3_PORT" in message
    assert "8335" in message


def test_the_block_ends_seven_after_the_s3_port() -> None:
    Settings.from_env({"ERASURE_S3_PORT": "8081", "ERASURE_SERVE_PORT": "8089", "ERASURE_IDP_PORT": "8095"})
    assert "ERASURE_SERVE_PORT" in _refusal({"ERASURE_S3_PORT": "8081", "ERASURE_SERVE_PORT": "8088"})


def test_ports_of_parts_not_run_locally_are_not_claimed() -> None:
    # S3 elsewhere: SeaweedFS does not run, so its ports are free for the console
    Settings.from_env({"ERASURE_S3_PORT": "8083", "ERASURE_S3_ENDPOINT": "https://s3.example.com"})
    # an external Temporal: the dev server's ports are not used
    Settings.from_env({"ERASURE_TEMPORAL_ADDRESS": "temporal.example.com:7233", "ERASURE_TEMPORAL_PORT": "8088"})
    # metrics off (0) is no port
    Settings.from_env({"ERASURE_METRICS_PORT": "0", "ERASURE_CONSOLE_METRICS_PORT": "0"})


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"ERASURE_METRICS_PORT": "9464", "ERASURE_CONSOLE_METRICS_PORT": "9465"},
        {"ERASURE_CACHE_URL": "none"},
    ],
    ids=["defaults", "metrics", "no-cache"],
)
def test_every_port_a_local_part_listens_on_is_claimed_by_one_setting(env: dict[str, str], tmp_path: Path) -> None:
    """The check covers the launcher: every port a part of ``erasure stack up`` would listen on is claimed by a
    setting the check knows, so a part added with a port of its own cannot slip past it."""
    from workers.settings.ports import claimed_ports

    settings = Settings.from_env({"ERASURE_STATE_DIR": str(tmp_path), **env})
    claimed = {port: name for name, ports in claimed_ports(settings).items() for port in ports}
    parts = [p for p in [*all_parts(settings), *app_parts(settings)] if p.embedded]
    listened = {port: part.name for part in parts for port in part.process().ports}
    assert listened, "no part listens: the comparison would be vacuous"
    assert set(listened) <= set(claimed), {p: n for p, n in listened.items() if p not in claimed}
    assert settings.ports["s3"] + 7 in listened  # SeaweedFS's block, all eight of them
    if settings.metrics_port:
        assert claimed[settings.metrics_port] == "ERASURE_METRICS_PORT"


def test_production_mode_claims_no_local_stack_port(tmp_path: Path) -> None:
    """Production runs no local stack; its processes' ports live in separate pods or containers."""
    from workers.settings.ports import claimed_ports

    secret = tmp_path / "s"
    secret.write_text("ab" * 32)
    settings = Settings.from_env(
        {
            "ERASURE_MODE": "production",
            "ERASURE_TEMPORAL_ADDRESS": "temporal:7233",
            "ERASURE_DATABASE_URL": "postgresql://u:p@db:5432/x",
            "ERASURE_S3_ENDPOINT": "aws",
            "ERASURE_KMS_ENDPOINT": "aws",
            "ERASURE_KMS_KEY_ID": "k",
            "ERASURE_SUBJECT_KEY_SECRET_FILE": str(secret),
            "ERASURE_SIGNING_KEY_FILE": str(secret),
            "ERASURE_PAYLOAD_KEY_FILE": str(secret),
            "ERASURE_SERVE_PORT": "9464",
            "ERASURE_METRICS_PORT": "9464",  # the worker's pod, not the console's
        }
    )
    assert claimed_ports(settings) == {}

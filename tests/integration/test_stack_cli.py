"""``erasure stack up | status | down`` end to end, on its own free ports and state directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.stack_fixture import make_test_settings
from workers.stack.parts import root_postgres_path

pytestmark = pytest.mark.integration

ERASURE = [sys.executable, "-m", "workers.cli"]


def run(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ERASURE, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def stack_pids(state: Path) -> list[int]:
    return [int(__import__("json").loads(p.read_text())["pid"]) for p in (state / "run").glob("*.pid")]


def test_stack_up_status_down(tmp_path: Path) -> None:
    settings = make_test_settings(tmp_path / "state")
    env = settings.env()
    try:
        first = run(env, "stack", "up")
        assert first.returncode == 0, first.stderr
        assert "Temporal UI: http://127.0.0.1:" in first.stdout
        pids = stack_pids(settings.state_path)
        assert len(pids) == 8  # postgres, s3, kms, temporal, cache; idp, worker, console

        status = run(env, "stack", "status")
        assert status.returncode == 0, status.stdout + status.stderr
        for part in ("postgres", "s3", "kms", "temporal", "idp", "worker", "console"):
            assert any(line.split()[:2] == [part, "healthy"] for line in status.stdout.splitlines()), status.stdout
        with urllib.request.urlopen(settings.local_ui_url, timeout=10) as resp:  # noqa: S310 - local UI
            assert resp.status == 200
        assert f"Console: {settings.console_base_url}" in first.stdout
        with urllib.request.urlopen(settings.console_base_url + "/healthz", timeout=10) as resp:  # noqa: S310
            assert resp.status == 200
        # the UI through the console asks for a login first: the local identity provider's form
        with urllib.request.urlopen(settings.ui_url + "/", timeout=10) as resp:  # noqa: S310 - local console
            assert resp.url.startswith(settings.local_idp_url + "/authorize?")
            assert 'name="password"' in resp.read().decode()

        schedules = run(env, "schedule", "list")
        assert schedules.returncode == 0, schedules.stderr
        assert "late-writer-sweep  active  every 1:00:00" in schedules.stdout
        assert "retention-expiry-sweep  active  every 1:00:00" in schedules.stdout

        second = run(env, "stack", "up")
        assert second.returncode == 0, second.stderr
        assert second.stdout.count("already running") == 8
        assert stack_pids(settings.state_path) == pids  # nothing restarted
    finally:
        down = run(env, "stack", "down")
    assert down.returncode == 0, down.stderr
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    after = run(env, "stack", "status")
    assert after.returncode == 6  # unreachable (docs/operations.md, "Exit codes")
    assert all(" stopped " in line for line in after.stdout.splitlines() if line.startswith("  "))

    # --purge deletes what the stack stored: its state directory and, as root, its Postgres directory
    pg_dir = root_postgres_path(settings)
    assert pg_dir.is_dir() == (os.geteuid() == 0)
    purged = run(env, "stack", "down", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not settings.state_path.exists()
    assert not pg_dir.exists()


def test_port_taken_is_one_clear_message(tmp_path: Path) -> None:
    settings = make_test_settings(tmp_path / "state")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", settings.ports["kms"]))
        blocker.listen()
        # Only the KMS part is started so the test stays quick.
        from workers.errors import StackError
        from workers.stack.parts import KmsPart

        with pytest.raises(StackError, match=rf"kms: port {settings.ports['kms']} is already in use"):
            KmsPart(settings).up()
    assert not (settings.state_path / "run" / "kms.pid").exists()  # nothing was started


def test_unreachable_database_url_is_one_clear_message(tmp_path: Path) -> None:
    settings = make_test_settings(tmp_path / "state")
    env = {**settings.env(), "ERASURE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    result = run(env, "stack", "status")
    # status reports the external database as unreachable rather than failing
    assert "postgres  external-unreachable" in result.stdout
    up = run(env, "stack", "up", timeout=60)
    assert up.returncode == 6  # unreachable
    assert "Traceback" not in up.stderr
    assert "postgres: external endpoint 127.0.0.1:1/none is unreachable" in up.stderr


def test_bad_setting_is_one_clear_message(tmp_path: Path) -> None:
    result = run({"ERASURE_STATE_DIR": str(tmp_path), "ERASURE_PG_PORT": "seventy"}, "stack", "status")
    assert result.returncode == 2
    assert result.stderr.strip() == "erasure: error: ERASURE_PG_PORT must be an integer, got 'seventy'"

"""Issue 31, item 1: ``erasure worker --check`` answers within its deadline against services that never answer.

It took 286 s against endpoints that accept a connection and never answer (botocore's read timeout times its
retries, for KMS and S3), while the probes allow 60 s. Here Postgres, Temporal, S3 and KMS all point at one
listener that accepts and stays silent: the command (a real process, as the probe runs it) ends within its
deadline, every part fails with a line that says why, and ``--json`` says the same as a document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.silent_port import silent_port_fixture  # noqa: F401 (the fixture `silent_port`, used by name)
from workers.check import PartCheck, run_parts

pytestmark = pytest.mark.integration


def test_a_check_against_services_that_never_answer_ends_within_its_deadline(silent_port: int, tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{silent_port}"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "ERASURE_MODE": "production",
        "ERASURE_STATE_DIR": str(tmp_path / "state"),
        "ERASURE_TEMPORAL_ADDRESS": endpoint,
        "ERASURE_DATABASE_URL": f"postgresql://erasure@{endpoint}/erasure",
        "ERASURE_S3_ENDPOINT": f"http://{endpoint}",
        "ERASURE_KMS_ENDPOINT": f"http://{endpoint}",
        "ERASURE_KMS_KEY_ID": "00000000-0000-4000-8000-000000000000",
        "ERASURE_SUBJECT_KEY_SECRET": "11" * 32,
        "ERASURE_SIGNING_KEY": "22" * 32,
        "ERASURE_PAYLOAD_KEY": "33" * 32,
        "AWS_ACCESS_KEY_ID": "check-test",
        "AWS_SECRET_ACCESS_KEY": "check-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    deadline = 8.0
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli", "worker", "--check", "--json", "--deadline", str(deadline)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert took < deadline + 10, f"the check took {took:.1f} s against a deadline of {deadline} s"  # start-up aside
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["ready"] is False
    assert report["seconds"] <= deadline + 1
    parts = {p["name"]: p for p in report["parts"]}
    assert set(parts) == {"postgres", "temporal", "kms", "buckets", "adapters", "data_map"}
    assert not any(p["ok"] for p in parts.values())  # the adapters line too: its database never answered
    assert all(p["detail"] for p in parts.values())
    assert "11" * 32 not in result.stdout + result.stderr  # no secret in what it says


def test_parts_run_at_once_and_one_that_never_returns_is_reported_as_not_reached() -> None:
    never = threading.Event()

    def stuck() -> PartCheck:
        never.wait(60)
        return PartCheck("stuck", True, "too late")

    def slow_ok(name: str) -> PartCheck:
        time.sleep(1.5)
        return PartCheck(name, True, "fine")

    started = time.monotonic()
    results = run_parts(
        [("stuck", stuck), ("slow", lambda: slow_ok("slow")), ("slow2", lambda: slow_ok("slow2"))], deadline=2.5
    )
    took = time.monotonic() - started
    never.set()
    assert took < 2.5 + 0.5
    assert [r.name for r in results] == ["stuck", "slow", "slow2"]  # reported in order
    assert not results[0].ok
    assert "not reached" in results[0].detail
    assert results[1].ok
    assert results[2].ok  # both slow parts ran at once: 3 s in turn would not fit inside 2.5 s

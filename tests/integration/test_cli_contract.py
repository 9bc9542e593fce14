"""The ``erasure`` CLI as a script meets it, on the real stack (issue 42 item 3): ``--json`` on the commands
that print data (one JSON document, no raw user id), the exit-code table of docs/operations.md
(``workers.errors.ExitCode``), a reader that leaves early (``| head``) ending nothing in a traceback, and
holds and waits said at filing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.saga_harness import SagaHarness, cli
from workers.errors import ExitCode
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "cli-contract"


def _address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


async def _json(saga: SagaHarness, env: WorkflowEnvironment, *args: str) -> object:
    code, out, err = await cli(saga, _address(env), *args, "--json")
    assert code == ExitCode.OK, (args, code, err)
    assert "Traceback" not in err
    return json.loads(out)


async def test_every_data_command_answers_one_json_document_without_the_raw_id(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    users = user_ids(2, 431, prefix="contract")
    await saga.seed(APP, users, "small", 431)

    held = await _json(saga, temporal_env, "hold", "--app", APP, "--user", users[1], "--reason", "case 4")
    assert isinstance(held, dict)
    assert held["hold"] == "placed"
    filed_held = await _json(saga, temporal_env, "request", "--app", APP, "--user", users[1])
    assert isinstance(filed_held, dict)
    assert filed_held["waits"]["on_hold"] is True  # said at filing
    assert filed_held["waits"]["earliest_end"] is None

    filed = await _json(
        saga, temporal_env, "request", "--app", APP, "--user", users[0], "--reason", "contract", "--wait"
    )
    assert isinstance(filed, dict)
    assert filed["waits"]["on_hold"] is False
    assert filed["waits"]["ingestion_delay_seconds"] == saga.settings.ingestion_delay
    assert filed["status"] == "completed"  # --wait with --json: followed quietly, one document at the end
    request_id = str(filed["request_id"])
    assert (await saga.result(request_id)).status == "completed"

    status = await _json(saga, temporal_env, "status", request_id)
    assert isinstance(status, dict)
    assert (status["state"], status["kind"], status["progress"]["request_id"]) == ("completed", "erasure", request_id)
    listed = await _json(saga, temporal_env, "list", "--status", "completed", "--limit", "500")
    assert isinstance(listed, list)
    assert request_id in {row["request_id"] for row in listed}
    verified = await _json(saga, temporal_env, "verify", request_id)
    assert isinstance(verified, dict)
    assert verified["passed"] is True
    assert {c["check"] for c in verified["checks"]} >= {"memory", "logs"}

    code, receipt, _ = await cli(saga, _address(temporal_env), "receipt", "show", request_id, "--json")
    assert code == ExitCode.OK
    (tmp_path / "receipt.json").write_text(receipt)
    checked = await _json(saga, temporal_env, "receipt", "verify", str(tmp_path / "receipt.json"))
    assert isinstance(checked, dict)
    assert (checked["signature_valid"], checked["exit_code"], checked["request_id"]) == (True, 0, request_id)

    schedules = await _json(saga, temporal_env, "schedule", "list")
    assert isinstance(schedules, list)

    released = await _json(saga, temporal_env, "release", "--app", APP, "--user", users[1], "--reason", "done")
    assert isinstance(released, dict)
    assert released["hold"] == "released"
    everything = json.dumps([held, filed_held, filed, status, listed, verified, checked, released])
    assert not any(user in everything for user in users)  # the subject key, never the raw id


async def test_the_exit_codes_mean_one_thing_each(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = _address(temporal_env)
    cases = [
        (("status", "er_00000000000000000000"), ExitCode.NOT_FOUND, "no erasure request"),
        (("receipt", "show", "er_00000000000000000000"), ExitCode.NOT_FOUND, "no receipt"),
        (("list", "--limit", "-3"), ExitCode.USAGE, "is not at least 1"),
        (("list", "--status", "nonsense"), ExitCode.USAGE, "invalid choice"),
        (("request", "--app", APP, "--user", " padded"), ExitCode.USAGE, ""),
    ]
    for args, expected, said in cases:
        code, _out, err = await cli(saga, address, *args)
        assert code == expected, (args, code, err)
        assert said in err
        assert "Traceback" not in err
    forged = tmp_path / "forged.json"
    forged.write_text('{"receipt": {"request_id": "er_1"}, "signature": {"alg": "Ed25519", "value": "AAAA"}}')
    code, out, err = await cli(saga, address, "receipt", "verify", str(forged))
    assert (code, "Traceback" in err) == (ExitCode.VERIFICATION_FAILED, False), out + err
    code, _out, err = await cli(saga, "127.0.0.1:1", "schedule", "list")  # nothing listens there
    assert code == ExitCode.UNREACHABLE, err
    assert "cannot connect to Temporal at 127.0.0.1:1" in err


async def test_a_reader_that_leaves_early_ends_nothing_in_a_traceback(saga: SagaHarness) -> None:
    """``| true`` reads nothing and is gone before the command writes: every write meets a closed pipe."""
    proc = await asyncio.create_subprocess_shell(
        f"set -o pipefail; {sys.executable} -m workers.cli list --limit 500 | true",
        env={**os.environ, **saga.settings.env()},
        executable="/bin/bash",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert "Traceback" not in err.decode()
    assert "BrokenPipe" not in err.decode()
    assert proc.returncode == 0, err.decode()

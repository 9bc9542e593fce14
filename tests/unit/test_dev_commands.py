"""Development commands (the local stack, the demo, synthetic users) are refused in production mode: one
line naming the command and the mode, exit 2, no traceback, nothing started or written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workers.cli import DEV_ONLY, build_parser, main, refuse_in_production

DEV_COMMANDS = [["stack", "up"], ["stack", "down"], ["stack", "status"], ["demo"], ["seed", "--users", "1"]]


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Production mode with none of its required settings, as in a fresh production image."""
    for name in list(os.environ):
        if name.upper().startswith("ERASURE_"):
            monkeypatch.delenv(name)
    state = tmp_path / "state"
    monkeypatch.setenv("ERASURE_MODE", "production")
    monkeypatch.setenv("ERASURE_STATE_DIR", str(state))
    return state


def test_every_dev_command_is_a_command() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(DEV_ONLY) <= set(commands)


@pytest.mark.parametrize("argv", DEV_COMMANDS, ids=" ".join)
def test_dev_command_refused_in_production(
    argv: list[str], production: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 5  # refused (docs/operations.md, "Exit codes")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"erasure: error: 'erasure {argv[0]}' ")
    assert "refused in production mode (ERASURE_MODE=production)" in err
    assert not production.exists(), "a refused command must write nothing"


def test_other_commands_are_not_refused_as_dev_commands(production: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``migrate`` is a production command: it fails here on the missing settings, not on the mode."""
    assert main(["migrate"]) == 2
    err = capsys.readouterr().err
    assert "ERASURE_MODE=production requires" in err
    assert "development command" not in err


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({}, False),
        ({"ERASURE_MODE": "local"}, False),
        ({"ERASURE_MODE": "production"}, True),
        ({"erasure_mode": "Production "}, True),  # the settings read names case-insensitively
    ],
)
def test_the_mode_is_read_like_the_settings_read_it(environ: dict[str, str], refused: bool) -> None:
    assert (refuse_in_production("stack", environ) is not None) is refused
    assert refuse_in_production("migrate", environ) is None


def test_the_installed_command_refuses_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ERASURE_")}
    env |= {"ERASURE_MODE": "production", "ERASURE_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli", "stack", "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 5
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists()

"""The ``erasure`` CLI as scripts meet it (issue 42 item 3): ``--version``, help on every option, usage
errors that exit 2 with one message (never a traceback), and the exit-code table the docs publish."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from workers.cli import build_parser, main
from workers.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def _parsers(parser: argparse.ArgumentParser, path: str = "erasure") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [
        f"{path}: {'/'.join(action.option_strings) or action.dest}"
        for path, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not (action.help and action.help.strip())
    ]
    assert missing == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert re.fullmatch(r"erasure \d+\.\d+\.\d+.*\n", capsys.readouterr().out)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["list", "--limit", "-3"], "-3 is not at least 1"),
        (["list", "--limit", "many"], "'many' is not a whole number"),
        (["list", "--status", "nonsense"], "invalid choice: 'nonsense'"),
    ],
)
def test_bad_arguments_are_a_usage_error_in_one_message(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert said in err
    assert "Traceback" not in err


def test_the_exit_code_table_is_the_one_the_docs_publish() -> None:
    page = (ROOT / "docs/operations.md").read_text()
    table = page.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    published = {int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", table, re.M)}
    assert published == {int(code) for code in ExitCode}

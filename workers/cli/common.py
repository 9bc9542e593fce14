"""What the command groups share: the platform a command builds for its run, and the way a command names a
user (exactly as stored, or byte for byte in hex)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from workers.settings import Settings

#: adds one command (its parser, arguments and handler) to the ``erasure`` subparsers
Adder = Callable[[Any], None]


def platform_for(settings: Settings) -> Any:
    from workers.wiring import build_platform

    return build_platform(settings)


def add_user_arguments(parser: argparse.ArgumentParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="the user id exactly as the platform stores it")
    who.add_argument(
        "--user-hex", help="the user id's UTF-8 bytes in hex, for ids a shell would trim or mangle (spaces, NBSP)"
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of lines (for scripts; no personal data)"
    )


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def print_json(document: Any) -> None:
    """One JSON document on stdout: sorted keys, dates in ISO 8601 (what ``--json`` prints)."""
    print(json.dumps(document, sort_keys=True, default=_plain))


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a clear usage error otherwise, never a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value

"""What the command groups share: the platform a command builds for its run, and the way a command names a
user (exactly as stored, or byte for byte in hex)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
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

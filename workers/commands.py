"""CLI subcommands beyond the stack (requests, status, holds, receipts, demo); registered by ``cli``."""

from __future__ import annotations

import argparse
from typing import Any

from workers.settings import Settings


def _demo(_args: argparse.Namespace, settings: Settings) -> int:
    from workers.stack import launcher

    print(f"Starting the local stack (state: {settings.state_path})")
    launcher.up(settings)
    st = launcher.status(settings)
    for part in st.parts:
        print(f"  {part.name:<9} {part.state}")
    return 0 if st.all_healthy else 3


def register(sub: Any) -> None:
    """Add the erasure subcommands to the ``erasure`` parser."""
    sub.add_parser("demo", help="run the end-to-end demo on the local stack").set_defaults(handler=_demo)

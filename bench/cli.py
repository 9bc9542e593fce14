"""Command line of ``python -m bench``."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from bench.run import Plan, main_sync
from workers.logging_setup import configure_logging


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small figures, under three minutes (CI-sized)")
    parser.add_argument("--runs", type=int, default=None, help="repetitions per figure (default 3; 1 with --quick)")
    parser.add_argument("--size", choices=["small", "typical", "large"], default=None, help="the measured user")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where bench.json and the PNG go")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.runs is not None and args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    configure_logging("json", logging.WARNING)
    plan = Plan.make(args.quick, args.runs, args.out, args.size)
    return main_sync(plan)

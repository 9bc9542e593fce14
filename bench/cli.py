"""Command line of ``python -m bench``."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from bench import capacity, results_history
from bench.measure import main_sync
from bench.plan import Plan
from workers.logging_setup import configure_logging


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small figures, under three minutes (CI-sized)")
    parser.add_argument("--runs", type=int, default=None, help="repetitions per figure (default 3; 1 with --quick)")
    parser.add_argument("--size", choices=["small", "typical", "large"], default=None, help="the measured user")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where bench.json and the charts go")
    parser.add_argument(
        "--history",
        type=Path,
        default=results_history.HISTORY,
        help="the results history a run appends one line to (default: bench/results-history.jsonl)",
    )
    parser.add_argument("--no-history", action="store_true", help="do not append this run to the history")
    parser.add_argument(
        "--huge",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure a huge user (10x large, bulk-seeded) by saga and directly (default: full runs only)",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=None,
        help="small erasures filed at once, drained by 1 then 2 worker processes (default 1000 full, 0 quick)",
    )
    parser.add_argument(
        "--background",
        type=int,
        default=None,
        metavar="N",
        help="background users of the large platform, bulk-seeded beyond the first 10 (default 100,000; 1,000 quick)",
    )
    parser.add_argument(
        "--bulk-keys",
        choices=["offline", "kms"],
        default="offline",
        help="bulk seeding's data keys: wrapped by the local stack's KMS key (default) or one KMS call each",
    )
    parser.add_argument(
        "--capacity",
        type=Path,
        default=None,
        metavar="BENCH_JSON",
        help="print the capacity model (docs/benchmark.md's table) from a run's bench.json, run nothing",
    )
    parser.add_argument(
        "--results-table",
        "--readme-table",
        dest="results_table",
        action="store_true",
        help="print docs/benchmark.md's results table (latest full run and the one before) from the history, "
        "run nothing",
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite that table in docs/benchmark.md from the history (make docs), run nothing",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.runs is not None and args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    if args.background is not None and args.background < 0:
        raise SystemExit("--background must not be negative")
    if args.capacity is not None:
        values = json.loads(args.capacity.read_text())["values"]
        print(capacity.markdown(capacity.Measured.from_values(values)), end="")
        return 0
    if args.results_table:
        print(results_history.results_table(results_history.read(args.history)), end="")
        return 0
    if args.write_docs:
        results_history.write_docs(history=args.history)
        return 0
    configure_logging("json", logging.WARNING)
    plan = Plan.make(
        args.quick, args.runs, args.out, args.size, args.backlog, args.background, args.bulk_keys, args.huge
    )
    return main_sync(plan, history=None if args.no_history else args.history)

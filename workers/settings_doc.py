"""Renders ``docs/configuration.md``'s table of settings from ``workers/settings.py`` (``make docs``).

The page is prose written by hand around one generated block, between two markers; only the block is
rewritten, from ``settings_doc()``: every variable, its default and its meaning (the field's description),
marked when production mode requires it. ``tests/unit/test_settings.py`` checks that the page is what this
renders now, so a setting added without running ``make docs`` fails the tests.

``python -m workers.settings_doc`` writes the page; ``--check`` changes nothing and exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from workers.settings import settings_doc

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SETTINGS_TABLE = "settings table"
REQUIRED = " **Required in production.**"


class MarkersMissing(ValueError):
    """The page lacks the begin and end markers of a generated block (or has them out of order)."""


def begin_marker(name: str) -> str:
    return f"<!-- begin generated: {name} (make docs; edit the source, not this block) -->"


def end_marker(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def splice(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``name``'s markers replaced by ``body``; everything else kept as is."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start or text.count(begin) != 1 or text.count(end) != 1:
        raise MarkersMissing(f"expected one {begin!r} followed by one {end!r}")
    return text[: start + len(begin)] + "\n" + body.strip("\n") + "\n" + text[stop:]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_table() -> str:
    """The Markdown table of every setting, in the order ``Settings`` declares them."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for variable, default, meaning, required in settings_doc():
        shown = f"`{default}`" if default else "(empty)"
        lines.append(f"| `{variable}` | {_cell(shown)} | {_cell(meaning)}{REQUIRED if required else ''} |")
    return "\n".join(lines) + "\n"


def render(page: str) -> str:
    """``page`` (the configuration page as it is) with its settings table generated afresh."""
    return splice(page, SETTINGS_TABLE, settings_table())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.settings_doc", description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=CONFIGURATION, help="the page to render (docs/configuration.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the page is stale")
    args = parser.parse_args(argv)
    current = args.path.read_text()
    fresh = render(current)
    if args.check:
        if fresh != current:
            print(f"{args.path} is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        args.path.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

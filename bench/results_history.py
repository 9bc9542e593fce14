"""The benchmark's results by commit: one JSON line a run, appended to a file that is checked in, so a
regression shows run to run; and the table of the latest full run and the one before, made from it, which
``write_docs`` puts in docs/benchmark.md (``make docs``).

Not to be confused with ``bench/history.py``, which reads step times from a Temporal workflow history.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.stats import Row, Target, fmt
from workers.settings_doc import splice

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "bench" / "results-history.jsonl"
DOC = ROOT / "docs" / "benchmark.md"
#: the name of docs/benchmark.md's generated block (``workers.settings_doc.splice``)
DOC_BLOCK = "benchmark results table"


@dataclass(frozen=True)
class Figure:
    """One row of the printed table: its median (min and max over the runs where known) and its target."""

    name: str
    unit: str
    median: float
    minimum: float | None = None
    maximum: float | None = None
    runs: int | None = None
    bound: float | None = None  # the target, if the figure has one
    at_most: bool = True
    verdict: str = ""  # PASS / MISS, with a target

    @classmethod
    def of(cls, row: Row) -> Figure:
        s, t = row.summary, row.target
        return cls(
            row.name,
            row.unit,
            s.median,
            s.minimum,
            s.maximum,
            s.runs,
            t.bound if t else None,
            t.at_most if t else True,
            row.verdict,
        )

    @property
    def target(self) -> str:
        return Target(self.bound, self.at_most).describe(self.unit) if self.bound is not None else ""


@dataclass(frozen=True)
class Entry:
    """One benchmark run."""

    commit: str  # `git rev-parse --short HEAD`, or "unknown"
    dirty: bool | None  # uncommitted changes besides this file (None: not known)
    date: str  # UTC, ISO 8601
    mode: str  # "quick" or "full"
    plan: dict[str, Any]  # the measured user, background users, concurrency, runs
    figures: list[Figure]
    total_seconds: float | None = None
    source: str = ""  # how the entry got here, when not appended by a run
    version: int = 1

    @property
    def targeted(self) -> list[Figure]:
        return [f for f in self.figures if f.bound is not None]

    @property
    def label(self) -> str:
        return self.commit + ("*" if self.dirty else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Entry:
        doc = json.loads(line)
        doc["figures"] = [Figure(**f) for f in doc["figures"]]
        return cls(**doc)


def git_state(repo: Path = ROOT, ignore: Path = HISTORY) -> tuple[str, bool | None]:
    """The short commit hash and whether the tree has uncommitted changes (``ignore`` aside: a run writes it)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    spec = [f":(exclude){ignore.relative_to(repo)}"] if ignore.is_relative_to(repo) else []
    try:
        status = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--", ".", *spec],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return commit or "unknown", None
    return commit or "unknown", bool(status.strip())


def record(
    mode: str,
    plan: Mapping[str, Any],
    table: Iterable[Row],
    total_seconds: float | None,
    state: tuple[str, bool | None] | None = None,
    now: datetime | None = None,
) -> Entry:
    commit, dirty = state if state is not None else git_state()
    when = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    total = round(total_seconds, 1) if total_seconds is not None else None
    return Entry(commit, dirty, when.isoformat(), mode, dict(plan), [Figure.of(r) for r in table], total)


def append(path: Path, entry: Entry) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(entry.to_json() + "\n")


def read(path: Path) -> list[Entry]:
    """Every entry, oldest first; no file is an empty history. A line that cannot be read names its number."""
    if not path.exists():
        return []
    entries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(Entry.from_json(line))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}:{n}: not a benchmark result ({exc})") from exc
    return entries


def _value(f: Figure | None, target: str) -> str:
    """Median, verdict, min-max where known and apart, and the target of the day if it was another."""
    if f is None:
        return "—"
    out = fmt(f.median) + f.unit
    if f.verdict:
        out += " " + f.verdict
    if f.minimum is not None and f.maximum is not None and f.minimum != f.maximum:
        out += f" ({fmt(f.minimum)}-{fmt(f.maximum)})"
    if f.target != target:
        out += f" against {f.target}"
    return out


def _heading(e: Entry) -> str:
    runs = e.plan.get("runs")
    size = e.plan.get("target_size")
    what = ", ".join(str(p) for p in (e.mode, f"{size} user" if size else None, f"{runs} runs" if runs else None) if p)
    dirty = " + uncommitted changes" if e.dirty else ""
    return f"`{e.commit}`{dirty}, {e.date[:10]} ({what})"


def results_table(entries: Sequence[Entry], history: str = "bench/results-history.jsonl") -> str:
    """Markdown for docs/benchmark.md: the targeted figures of the latest full run beside the run before it.

    Without any full run, says so and shows the latest runs the history holds, whatever their mode."""
    if not entries:
        return f"No benchmark run is recorded in `{history}` yet.\n"
    full = [e for e in entries if e.mode == "full"]
    shown = full[-2:][::-1] if full else list(entries[-2:][::-1])
    lines: list[str] = []
    if not full:
        lines += [f"No full run (`python -m bench`) is recorded in `{history}` yet; the latest runs it holds:", ""]
    elif len(full) == 1:
        lines += [f"Only one full run is recorded in `{history}`:", ""]
    headings = ["latest", "the run before"]
    columns = [f"{h}: {_heading(e)}" for h, e in zip(headings, shown, strict=False)]
    lines.append("| figure | target | " + " | ".join(columns) + " |")
    lines.append("|---" * (2 + len(shown)) + "|")
    names: list[str] = []
    for e in shown:
        names += [f.name for f in e.targeted if f.name not in names]
    for name in names:
        found = [next((f for f in e.targeted if f.name == name), None) for e in shown]
        target = next(f.target for f in found if f is not None)
        lines.append(f"| {name} | {target} | " + " | ".join(_value(f, target) for f in found) + " |")
    lines.append("")
    notes = [f"`{e.commit}`: {e.source}" for e in shown if e.source]
    tail = f"Median of the runs (min-max); made by `python -m bench --results-table` from `{history}`"
    tail += f", which holds {len(entries)} run(s), {len(full)} of them full."
    lines.append(" ".join([tail, *(n.rstrip(".") + "." for n in notes)]))
    return "\n".join(lines) + "\n"


def write_docs(doc: Path = DOC, history: Path = HISTORY) -> bool:
    """Rewrites the results table in ``doc`` (between its markers, nothing else) from ``history``; whether it
    changed."""
    current = doc.read_text()
    fresh = splice(current, DOC_BLOCK, results_table(read(history)))
    if fresh != current:
        doc.write_text(fresh)
    return fresh != current

"""Scan raw files for needles: the bytes a store would hold if it kept a string readable.

Pure functions over bytes and paths, no store clients (``tests/integration/test_raw_files.py`` points them at
every local store's files and at a backup; ``tests/unit/test_raw_scan.py`` shows each form is found).

A text needle is looked for in every form a store could write it in: UTF-8, UTF-16 (LE and BE), lower-case
hex of its UTF-8 bytes (how ``pg_dump`` writes ``bytea``) and base64 in each of the three alignments it can
have inside a longer encoded stream, standard and URL-safe alphabets (an ADK ``Part`` keeps its bytes
base64-encoded in JSON). A binary needle (a vector as float32) is looked for as it is. File paths are
searched too (a store naming a file after a user). Compression hides a needle from any byte scan: the test
turns it off where a store would use it, the scan does not decompress.

Each pattern is found through an anchor of a few bytes (its start, or its most varied window when the start
is monotonous, like a vector's leading zeros) with ``bytes.find``, and confirmed in full where the anchor
hits: needles that share a prefix share one pass over each file.
"""

from __future__ import annotations

import base64
import os
import struct
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ANCHOR = 8
#: base64 needs at least this many whole bytes of the needle in one alignment (12 characters): shorter runs
#: could match by accident
_MIN_BASE64_BYTES = 9
TEXT_FORMS = ("utf-8", "utf-16-le", "utf-16-be", "hex", "base64")


@dataclass(frozen=True)
class Pattern:
    """One form of one needle. ``needle`` is a label (``"erased/event"``): reports never print a value."""

    needle: str
    form: str
    data: bytes


@dataclass(frozen=True)
class Hit:
    needle: str
    form: str
    root: str  # the name the root was given (``"postgres"``, ``"backup-seaweedfs"``)
    path: str  # relative to the directory given for that root
    count: int

    @property
    def where(self) -> str:
        return f"{self.root}:{self.path}"


@dataclass(frozen=True)
class Scan:
    hits: tuple[Hit, ...]
    files: int
    size: int  # bytes read
    seconds: float = 0.0
    unreadable: tuple[str, ...] = ()  # files that vanished or could not be read while scanning (live stores)

    def of(self, needle: str, roots: Iterable[str] | None = None) -> dict[str, int]:
        """Where one needle was found (optionally only under some roots): ``root:path`` -> occurrences."""
        found: Counter[str] = Counter()
        for hit in self.select([needle], roots):
            found[hit.where] += hit.count
        return dict(found)

    def select(self, needles: Iterable[str] | None = None, roots: Iterable[str] | None = None) -> list[Hit]:
        """The hits of some needles (all when ``None``) under some roots (all when ``None``)."""
        wanted = None if needles is None else set(needles)
        places = None if roots is None else set(roots)
        return [h for h in self.hits if (wanted is None or h.needle in wanted) and (places is None or h.root in places)]


def base64_forms(raw: bytes) -> dict[str, bytes]:
    """The base64 text that ``raw`` becomes inside any longer base64 stream, per alignment and alphabet.

    Inside a stream, the needle starts at some offset; the groups of three bytes that lie wholly inside it
    start at its byte 0, 1 or 2 depending on that offset, and encode to the same characters wherever the
    stream is. Those characters, for each of the three starts, are the forms."""
    out: dict[str, bytes] = {}
    for start in range(3):
        chunk = raw[start:]
        chunk = chunk[: len(chunk) - len(chunk) % 3]
        if len(chunk) < _MIN_BASE64_BYTES:
            continue
        standard = base64.b64encode(chunk)
        out[f"base64+{start}"] = standard
        urlsafe = base64.urlsafe_b64encode(chunk)
        if urlsafe != standard:
            out[f"base64url+{start}"] = urlsafe
    return out


def text_forms(text: str) -> dict[str, bytes]:
    raw = text.encode("utf-8")
    return {
        "utf-8": raw,
        "utf-16-le": text.encode("utf-16-le"),
        "utf-16-be": text.encode("utf-16-be"),
        "hex": raw.hex().encode("ascii"),
        **base64_forms(raw),
    }


def text_patterns(needles: Mapping[str, str], forms: Collection[str] = TEXT_FORMS) -> list[Pattern]:
    """The forms (``TEXT_FORMS``, or some of them) of each labelled text needle."""
    return [
        Pattern(label, form, data)
        for label, text in needles.items()
        for form, data in text_forms(text).items()
        if form.split("+")[0].removesuffix("url") in forms
    ]


def float32_pattern(label: str, vector: Sequence[float]) -> Pattern:
    """A vector as a store keeps it: little-endian float32 (pgvector on x86, Chroma's HNSW and queue)."""
    return Pattern(label, "float32", struct.pack(f"<{len(vector)}f", *vector))


def _anchor(data: bytes) -> tuple[int, bytes]:
    """(offset, bytes) to search for: the start, unless it is monotonous (then the most varied window)."""
    if len(data) <= ANCHOR:
        return 0, data
    if len(set(data[:ANCHOR])) >= ANCHOR // 2:
        return 0, data[:ANCHOR]
    best = max(range(len(data) - ANCHOR + 1), key=lambda i: (len(set(data[i : i + ANCHOR])), -i))
    return best, data[best : best + ANCHOR]


class Matcher:
    """Patterns grouped by anchor, ready to count in any number of byte strings."""

    def __init__(self, patterns: Iterable[Pattern]) -> None:
        self.patterns = list(patterns)
        if any(not p.data for p in self.patterns):
            raise ValueError("an empty pattern matches everywhere")
        self._groups: dict[bytes, list[tuple[int, Pattern]]] = {}
        for p in self.patterns:
            offset, anchor = _anchor(p.data)
            self._groups.setdefault(anchor, []).append((offset, p))

    def count(self, data: bytes) -> Counter[tuple[str, str]]:
        """Occurrences of each (needle, form) in ``data`` (overlapping ones too)."""
        found: Counter[tuple[str, str]] = Counter()
        for anchor, group in self._groups.items():
            pos = data.find(anchor)
            while pos != -1:
                for offset, p in group:
                    start = pos - offset
                    if start >= 0 and data.startswith(p.data, start):
                        found[(p.needle, p.form)] += 1
                pos = data.find(anchor, pos + 1)
        return found


def files_under(root: Path) -> list[Path]:
    """Every regular file under ``root`` (or ``root`` itself when it is one), symlinks not followed."""
    if root.is_file():
        return [root]
    out: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out.append(path)
    return sorted(out)


def scan(roots: Mapping[str, Sequence[Path]], patterns: Iterable[Pattern], exclude: Collection[Path] = ()) -> Scan:
    """Count every pattern in every file under the named roots, and in the files' paths.

    ``roots`` maps a name (``"postgres"``, ``"backup-seaweedfs"``) to directories or files; a hit names its
    root and its path relative to the directory given. Files that vanish while a live store runs are
    listed as unreadable, not raised."""
    began = time.monotonic()
    matcher = Matcher(patterns)
    skipped = set(exclude)
    hits: list[Hit] = []
    unreadable: list[str] = []
    files = size = 0
    for name, paths in roots.items():
        for root in paths:
            for path in files_under(root):
                if path in skipped and path != root:
                    continue
                shown = str(path.relative_to(root)) if path != root else path.name
                try:
                    data = path.read_bytes()
                except OSError:
                    unreadable.append(f"{name}:{shown}")
                    continue
                files += 1
                size += len(data)
                for (needle, form), n in sorted(matcher.count(data).items()):
                    hits.append(Hit(needle, form, name, shown, n))
                for (needle, form), n in sorted(matcher.count(shown.encode("utf-8", "surrogateescape")).items()):
                    hits.append(Hit(needle, f"path:{form}", name, shown, n))
    return Scan(tuple(hits), files, size, time.monotonic() - began, tuple(unreadable))


def describe(hits: Iterable[Hit], limit: int = 60, note: Callable[[str], str | None] | None = None) -> str:
    """One line per (needle, file): the forms and counts, for an assertion message; ``note`` may name what a
    file is (``root:path`` -> e.g. the table a Postgres relation file holds)."""
    rows: dict[tuple[str, str], Counter[str]] = {}
    for h in hits:
        rows.setdefault((h.needle, h.where), Counter())[h.form] += h.count
    lines = []
    for (needle, where), forms in sorted(rows.items()):
        what = note(where) if note else None
        shown = f"{where} [{what}]" if what else where
        lines.append(f"  {needle}: {shown} ({', '.join(f'{form} x{n}' for form, n in sorted(forms.items()))})")
    if len(lines) > limit:
        lines = [*lines[:limit], f"  ... and {len(lines) - limit} more"]
    return "\n".join(lines) if lines else "  (none)"


def by_store(hits: Iterable[Hit]) -> dict[str, dict[str, int]]:
    """needle -> root name -> occurrences: the short summary of a scan."""
    out: dict[str, Counter[str]] = {}
    for h in hits:
        out.setdefault(h.needle, Counter())[h.root] += h.count
    return {k: dict(v) for k, v in sorted(out.items())}

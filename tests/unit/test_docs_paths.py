"""Docs that cannot go stale: every file, folder and module the README and docs/ name exists.

A doc names a place in the repository four ways: a path in backticks (`` `stores/logs/archive.py` ``, with an
optional ``::name`` that must be defined there; a bare `` `::name` `` is in the last file named before it), a
module's file name alone (`` `archive.py` ``, `` `test_saga.py::test_x` ``: some file of that name exists), a dotted
module in backticks (`` `stores.logs.archive` ``, with optional names after the module that must be defined in it,
and call arguments that are ignored), and a relative link (``[the guide](docs/adding-a-store.md)``). Templates
(``<id>``, ``{id}``, ``$VAR``, ``*``, ``...``) and paths outside the repository's own folders (object keys such as
``receipts/<id>.json``, ignored outputs such as ``bench-results/``) are not checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
PACKAGES = ("workflows", "activities", "verifier", "stores", "workers", "console", "bench", "tests")
TEMPLATE = re.compile(r"[<>{}$*\s]|\.\.\.")
BACKTICKED = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)")
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: a dotted name ending in one of these is a file's name (`bench.json`), not a module
FILE_SUFFIXES = frozenset({"json", "jsonl", "md", "py", "txt", "toml", "yaml", "yml", "sql", "html", "csv", "log"})


def ignored_folders() -> set[str]:
    """Top-level folders .gitignore names (outputs and local state: never the repository's own)."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return {line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")}


#: the repository's own top-level folders and files: a backticked path starting elsewhere is not ours
OWN = {
    p.name
    for p in ROOT.iterdir()
    if (not p.name.startswith(".") or p.name == ".ci") and p.name not in ignored_folders()
}


@cache
def by_file_name() -> dict[str, list[Path]]:
    """Every Python file of the repository's own folders by its name (``adapter.py`` -> each store's)."""
    found: dict[str, list[Path]] = {}
    for top in sorted(OWN):
        if (ROOT / top).is_dir():
            for path in sorted((ROOT / top).rglob("*.py")):
                found.setdefault(path.name, []).append(path)
    return found


@cache
def defined_names(path: Path) -> frozenset[str]:
    """The names a module defines at its top level: functions, classes, assignments and imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    return frozenset(names)


def module_file(dotted: str) -> Path | None:
    """The file or package a dotted module name is (``a/b.py``, ``a/b/__init__.py``, or a namespace folder)."""
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base):
        if candidate.exists():
            return candidate
    return None


def missing_dotted(text: str) -> str | None:
    """Why a dotted name does not exist, or None: its longest module prefix, then its first name in there."""
    parts = text.split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:cut]))
        if found is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        if found.is_dir():
            return f"{'.'.join(parts[:cut])} has no module {rest[0]}"
        if rest[0] not in defined_names(found):
            return f"{found.relative_to(ROOT)} defines no {rest[0]}"
        return None
    return "no such module"


def missing_path(text: str, base: Path) -> str | None:
    """Why a path (optionally ``path::name``) does not exist under ``base``, or None."""
    path, _, name = text.partition("::")
    target = (base / path).resolve()
    if not target.exists():
        return "no such file or folder"
    if name and target.suffix == ".py" and re.split(r"::|\.", name)[0] not in defined_names(target):
        return f"defines no {name}"
    return None


def missing_file_name(text: str) -> str | None:
    """Why ``name.py`` (optionally ``name.py::x``) names no file of the repository, or None."""
    name, _, inside = text.partition("::")
    paths = by_file_name().get(name, [])
    if not paths:
        return "no file of that name"
    if inside and not any(re.split(r"::|\.", inside)[0] in defined_names(p) for p in paths):
        return f"no {name} defines {inside}"
    return None


def references(doc: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line, what the doc names, why it is missing or None) for every place in the repository the doc names.

    A bare `` `::name` `` is a name in the last file named before it (`` `tests/x.py::a`, `::b` ``).
    """
    last_file = ""
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        for text in BACKTICKED.findall(line):
            text = text.strip()
            dotted = DOTTED.match(text)
            if dotted and "/" not in text and not TEMPLATE.search(dotted.group(0)):
                if dotted.group(0).rpartition(".")[2] not in FILE_SUFFIXES:
                    yield number, text, missing_dotted(dotted.group(0))
            elif "/" in text and not TEMPLATE.search(text) and text.split("/")[0] in OWN:
                last_file = text.partition("::")[0]
                yield number, text, missing_path(text, ROOT)
            elif re.fullmatch(r"\w+\.py(::[\w.:]+)?", text):
                last_file = text.partition("::")[0]
                yield number, text, missing_file_name(text)
            elif re.fullmatch(r"::\w+", text) and last_file:
                named = missing_path if "/" in last_file else lambda t, _root: missing_file_name(t)
                yield number, text, named(f"{last_file}{text}", ROOT)
        for target in LINK.findall(line):
            if not re.match(r"^[a-z]+:", target):
                yield number, target, missing_path(target, doc.parent)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(ROOT).as_posix() for d in DOCS])
def test_every_path_and_module_a_doc_names_exists(doc: Path) -> None:
    wrong = [f"{doc.name}:{line}: `{text}`: {why}" for line, text, why in references(doc) if why]
    assert wrong == []


def test_the_docs_name_places_at_all() -> None:
    """The scanner finds what it looks for: a doc that names nothing checkable would pass vacuously."""
    named = {text for doc in DOCS for _line, text, _why in references(doc)}
    assert "stores/adapters/interface.py" in named
    assert any(DOTTED.match(text) for text in named)
    assert "docs/adding-a-store.md" in named


def test_a_stale_name_is_caught(tmp_path: Path) -> None:
    doc = tmp_path / "stale.md"
    doc.write_text(
        "Read `stores/logs/archive_gone.py` and `stores.logs.archive_gone`, `workers.wiring.no_such_name`,\n"
        "`stores/adapters/interface.py::NoSuchProtocol`, `::NoSuchCapability` and [the guide](missing.md); not\n"
        "`receipts/<id>.json`,"
        " nor `bench-results/bench.json`, nor `bench.json`, nor `erasure.adapters`; `stores/adapters/interface.py` and"
        " its `::EraseAdapter` exist.\n"
        "Not `log_reads.py` nor `reads.py::NoSuchReads`; `test_layers.py::test_the_rule_sees_what_it_looks_for`, not\n"
        "`::test_no_such_test`.\n",
        encoding="utf-8",
    )
    found = {text: why is not None for _line, text, why in references(doc)}
    assert found == {
        "stores/logs/archive_gone.py": True,
        "stores.logs.archive_gone": True,
        "workers.wiring.no_such_name": True,
        "stores/adapters/interface.py::NoSuchProtocol": True,
        "::NoSuchCapability": True,
        "missing.md": True,
        "log_reads.py": True,
        "reads.py::NoSuchReads": True,
        "test_layers.py::test_the_rule_sees_what_it_looks_for": False,
        "::test_no_such_test": True,
        "stores/adapters/interface.py": False,
        "::EraseAdapter": False,
    }

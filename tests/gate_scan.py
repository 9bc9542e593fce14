"""Where the runtime code changes user data: the architecture test's scanner (``tests/unit/test_one_gate.py``).

A change of user data is any of: an SQL ``DELETE FROM`` or ``UPDATE`` of a table that holds a user's data (the
agent platform's tables, written in any string literal of the module), an S3 object delete (``delete_object``,
``delete_objects``, the project's ``delete_versions``), a cache key delete (``delete``, ``unlink``, ``zrem``,
``hdel`` on a client or pipeline), a vector store delete (Qdrant's ``delete``), or a directory removal
(``rmtree``: a Chroma subject's files). The scanner reads the source (``ast``), never imports it, and reports
each place as (module path, line, what).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: tables that hold a user's data (the platform's, ADK's and the key store's); the erasure's own books,
#: ledgers and the console's tables are not in it
USER_DATA_TABLES = frozenset(
    {
        "memories",
        "sessions",
        "events",
        "user_states",
        "app_states",
        "data_keys",
        "data_key_versions",
        "log_segments",
        "log_subject_index",
    }
)
#: method names that delete from an object store, a cache, a vector store or a directory tree
DELETING_CALLS = frozenset(
    {
        "delete_object",
        "delete_objects",
        "delete_versions",
        "delete",
        "unlink",
        "zrem",
        "hdel",
        "rmtree",
        "set_payload",  # Qdrant: a point's payload rewritten (state, superseded_by)
        "overwrite_payload",
    }
)
#: the runtime code: every layer that runs in the worker, the console or the CLI
RUNTIME = ("stores", "activities", "verifier", "workers", "console", "workflows")
_SQL = re.compile(r"\b(DELETE\s+FROM|UPDATE)\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)


@dataclass(frozen=True)
class Change:
    module: str  # path relative to the root, with "/" separators
    line: int
    what: str  # "DELETE FROM memories", "call delete_objects"


def _changes_in(source: str, module: str) -> Iterator[Change]:
    tree = ast.parse(source)
    decorators = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(ast.Module(body=list(fn.decorator_list), type_ignores=[]))
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for verb, table in _SQL.findall(node.value):
                if table.lower() in USER_DATA_TABLES:
                    yield Change(module, node.lineno, f"{' '.join(verb.upper().split())} {table.lower()}")
        elif isinstance(node, ast.Call) and id(node) not in decorators:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in DELETING_CALLS:
                yield Change(module, node.lineno, f"call {name}")


def changes(root: Path, modules: Iterable[Path] | None = None) -> list[Change]:
    """Every place under ``root``'s runtime folders (or in ``modules``) that changes user data."""
    paths = modules if modules is not None else (p for top in RUNTIME for p in sorted((root / top).rglob("*.py")))
    found: list[Change] = []
    for path in paths:
        module = path.relative_to(root).as_posix()
        found.extend(_changes_in(path.read_text(encoding="utf-8"), module))
    return found


def calls_any(path: Path, names: Iterable[str]) -> bool:
    """Whether the module calls one of ``names`` (a function or a method of that name)."""
    wanted = set(names)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in wanted:
                return True
    return False

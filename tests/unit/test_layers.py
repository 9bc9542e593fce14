"""The layer rule: every module of the project imports only its own layer or the ones below it, in no circle.

The top-level folders are fixed by the design; the layers show inside them. From the bottom up:

- ``stores``: ``infra``; ``privacy``; ``ledgers`` and ``books``; ``adapters`` (the erase-adapter contract); one
  folder per store of the agent platform (peers: a store never imports another store); ``forgetting`` and
  ``lifecycle``; ``platform``; ``operations``;
- what workflows and activities share (``workflows.contracts``) and the receipt's signing (``verifier.receipts.
  signing``);
- activities (``activities``, the verifier's checks, issuing a receipt);
- workflows (``workflows``, the verifier's workflow);
- the worker's runtime (``workers``), then the console (``console``);
- tooling that nothing below may import: the command line (the composition root: ``workers.cli`` and the
  command modules it loads), the local stack and its seeders, the demo and the benchmark.

Imports under ``if TYPE_CHECKING:`` count too: a type an adapter names is a dependency the reader must follow. Every
import is read from the source (``ast``), including the ones inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("stores", "workflows", "activities", "verifier", "workers", "console", "bench")

#: the stores of the agent platform: one folder each, peers of one another
STORE_FOLDERS = ("sessions", "artifacts", "memory", "chroma", "response_cache", "logs", "keys", "physical", "qdrant")

#: layers from the bottom up; a module belongs to the layer of its longest matching prefix
LAYERS: tuple[tuple[str, ...], ...] = (
    ("stores.infra",),
    ("stores.privacy",),
    ("stores.ledgers", "stores.books"),
    ("stores.adapters",),
    tuple(f"stores.{s}" for s in STORE_FOLDERS),
    ("stores.forgetting", "stores.lifecycle"),
    ("stores.platform",),
    ("stores.operations",),
    ("workflows.contracts", "verifier.receipts.signing"),
    ("activities", "verifier.checks", "verifier.receipts"),
    ("workflows", "verifier"),
    ("workers",),
    ("console",),
    (
        "workers.cli",
        "workers.commands",
        "workers.deployment_commands",
        "workers.forget_commands",
        "workers.memory_commands",
        "workers.reseal_command",
        "workers.stack",
        "workers.demo",
        "bench",
    ),
)

#: layers whose members must not import one another (only what lies below)
PEERS = {4}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The project module an imported name lives in (``a.b.c`` may be a module or a name in ``a.b``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names]
        for name in names:
            target = resolve(name, known)
            if target is not None and target != module and not module.startswith(f"{target}."):
                yield Import(module, target, node.lineno)


def layer_of(module: str) -> tuple[int, str]:
    if module in PACKAGES:  # a top-level package's own ``__init__``: a docstring, below everything
        return (0, module)
    best: tuple[int, str] = (-1, "")
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(f"{prefix}.")) and len(prefix) > len(best[1]):
                best = (index, prefix)
    return best


def all_imports() -> list[Import]:
    known = modules()
    return [imp for module, path in known.items() for imp in imports_of(module, path, known)]


def upward(imports: list[Import]) -> list[str]:
    wrong: list[str] = []
    for imp in imports:
        (src_layer, src_home), (dst_layer, dst_home) = layer_of(imp.source), layer_of(imp.target)
        if src_layer < 0 or dst_layer < 0:
            wrong.append(f"{imp.source}:{imp.line} -> {imp.target}: a module in no layer")
        elif dst_layer > src_layer:
            wrong.append(f"{imp.source}:{imp.line} -> {imp.target}: imports upward")
        elif dst_layer == src_layer and src_layer in PEERS and src_home != dst_home:
            wrong.append(f"{imp.source}:{imp.line} -> {imp.target}: a store imports another store")
    return wrong


def cycles(imports: list[Import]) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_imports_only_its_layer_or_the_ones_below() -> None:
    assert upward(all_imports()) == []


def test_no_modules_import_one_another_in_a_circle() -> None:
    assert cycles(all_imports()) == []


def test_no_module_imports_another_modules_private_names() -> None:
    known = modules()
    private: list[str] = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and resolve(node.module, known):
                private += [
                    f"{module}:{node.lineno} -> {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert private == []


def test_the_rule_sees_what_it_looks_for() -> None:
    """An upward import, a store importing another store, and a circle are each caught."""
    up = [Import("stores.privacy.keys", "stores.platform", 1)]
    sideways = [Import("stores.memory.rows", "stores.sessions.sealing", 2)]
    down = [
        Import("activities.memory", "stores.memory.rows", 3),
        Import("stores.memory.rows", "stores.infra.errors", 4),
    ]
    assert upward(up) == ["stores.privacy.keys:1 -> stores.platform: imports upward"]
    assert upward(sideways) == ["stores.memory.rows:2 -> stores.sessions.sealing: a store imports another store"]
    assert upward(down) == []
    circle = [Import("console.pages", "console.audit", 1), Import("console.audit", "console.pages", 9)]
    assert cycles(circle) == [["console.audit", "console.pages"]]
    assert cycles(down) == []


def test_every_module_has_a_layer_and_the_runtime_never_imports_the_tooling() -> None:
    tooling = LAYERS[-1]
    assert all(layer_of(m)[0] >= 0 for m in modules())
    reaching = [
        f"{imp.source}:{imp.line} -> {imp.target}"
        for imp in all_imports()
        if layer_of(imp.target)[1] in tooling and layer_of(imp.source)[1] not in tooling
    ]
    assert reaching == []

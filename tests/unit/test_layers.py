"""The layer rule: every module of the project imports only its own layer or the ones below it, in no circle.

The top-level folders are fixed by the design; the layers show inside them. From the bottom up:

- ``stores``: ``infra``; ``privacy``; ``ledgers`` and ``books``; ``adapters`` (the erase-adapter contract); one
  folder per store of the agent platform, the folders the ``erasure.adapters`` entry points name (peers: a store
  never imports another store); ``forgetting`` and ``lifecycle``; ``platform``; ``operations``;
- workflow code (``workflows``, the verifier's workflow) with the contracts it shares with the activities, and the
  receipt's signing (``verifier.receipts.signing``);
- activities (``activities``) and the rest of the verifier (its checks, issuing a receipt);
- the worker's runtime (``workers``), then the console (``console``);
- tooling that nothing below may import: the command line (the composition root: ``workers.cli`` and the
  command modules it loads), the local stack and its seeders, the demo and the benchmark.

Workflow code runs in Temporal's sandbox and replays: it imports only ``workflows``, ``temporalio`` and the standard
library (it calls activities by typed reference), whatever layer the target lies in.

Imports under ``if TYPE_CHECKING:`` count too: a type an adapter names is a dependency the reader must follow. Every
import is read from the source (``ast``), including the ones inside functions and the ones by name
(``importlib.import_module("...")``, ``__import__("...")`` with a literal). The folder-level rules, followed through
every chain of imports, are also import-linter contracts (``pyproject.toml``, ``tests/unit/test_import_contracts.py``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.import_contracts import store_folders

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("stores", "workflows", "activities", "verifier", "workers", "console", "bench")

Layers = tuple[tuple[str, ...], ...]

#: the layer of the stores of the agent platform: one folder each, peers of one another
STORE_LAYER = 4
#: the modules that run in Temporal's workflow sandbox
WORKFLOW_CODE = ("workflows", "verifier.workflow")
#: what workflow code may import besides the standard library
WORKFLOW_IMPORTS = ("workflows", "temporalio")


def layers_of_stores(folders: Sequence[str]) -> Layers:
    """The layers from the bottom up, with ``folders`` (``stores.<name>``) as the stores' layer.

    A module belongs to the layer of its longest matching prefix.
    """
    return (
        ("stores.infra",),
        ("stores.privacy",),
        ("stores.ledgers", "stores.books"),
        ("stores.adapters",),
        tuple(folders),
        ("stores.forgetting", "stores.lifecycle"),
        ("stores.platform",),
        ("stores.operations",),
        ("workflows", "verifier.workflow", "verifier.receipts.signing"),
        ("activities", "verifier"),
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


#: the store folders the adapters' entry points name: a store added by its entry point is in its layer at once
LAYERS = layers_of_stores(store_folders(ROOT / "pyproject.toml"))


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


def _absolute(name: str, level: int, package: str) -> str:
    """``name`` imported ``level`` packages up from ``package`` (``from ..x import y``), as an absolute name."""
    if not level:
        return name
    anchor = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*anchor, name] if name else anchor)


def _by_name(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("...")``, ``import_module("...")`` or ``__import__``."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every name ``module`` imports, absolute, with its line: statements, and calls by a literal name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            yield from ((f"{base}.{a.name}" if base else a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.Call) and (name := _by_name(node)):
            level = len(name) - len(name.lstrip("."))
            yield _absolute(name[level:], level, package), node.lineno


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    for name, line in imported_names(module, path):
        target = resolve(name, known)
        if target is not None and target != module and not module.startswith(f"{target}."):
            yield Import(module, target, line)


def within(module: str, prefixes: Sequence[str]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in prefixes)


def layer_of(module: str, layers: Layers = LAYERS) -> tuple[int, str]:
    if module in PACKAGES:  # a top-level package's own ``__init__``: a docstring, below everything
        return (0, module)
    best: tuple[int, str] = (-1, "")
    for index, prefixes in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(f"{prefix}.")) and len(prefix) > len(best[1]):
                best = (index, prefix)
    return best


def all_imports() -> list[Import]:
    known = modules()
    return [imp for module, path in known.items() for imp in imports_of(module, path, known)]


def misplaced(imports: list[Import], layers: Layers = LAYERS) -> list[str]:
    """The imports that break the layer rule: upward, between two stores, or out of workflow code."""
    wrong: list[str] = []
    for imp in imports:
        (src_layer, src_home), (dst_layer, dst_home) = layer_of(imp.source, layers), layer_of(imp.target, layers)
        where = f"{imp.source}:{imp.line} -> {imp.target}"
        if src_layer < 0 or dst_layer < 0:
            wrong.append(f"{where}: a module in no layer (a store folder needs its entry point in pyproject.toml)")
        elif within(imp.source, WORKFLOW_CODE) and not within(imp.target, WORKFLOW_IMPORTS):
            wrong.append(f"{where}: workflow code imports outside workflows")
        elif dst_layer > src_layer:
            wrong.append(f"{where}: imports upward")
        elif dst_layer == src_layer == STORE_LAYER and src_home != dst_home:
            wrong.append(f"{where}: a store imports another store")
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
    assert misplaced(all_imports()) == []


def test_workflow_code_imports_only_workflows_temporalio_and_the_standard_library() -> None:
    allowed = {*sys.stdlib_module_names, *WORKFLOW_IMPORTS}
    outside = [
        f"{module}:{line} -> {name}"
        for module, path in modules().items()
        if within(module, WORKFLOW_CODE)
        for name, line in imported_names(module, path)
        if name.partition(".")[0] not in allowed
    ]
    assert outside == []


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
    """An upward import, a store importing another store, workflow code importing a store, and a circle."""
    up = [Import("stores.privacy.keys", "stores.platform", 1)]
    sideways = [Import("stores.memory.rows", "stores.sessions.sealing", 2)]
    down = [
        Import("activities.memory", "stores.memory.rows", 3),
        Import("stores.memory.rows", "stores.infra.errors", 4),
    ]
    assert misplaced(up) == ["stores.privacy.keys:1 -> stores.platform: imports upward"]
    assert misplaced(sideways) == ["stores.memory.rows:2 -> stores.sessions.sealing: a store imports another store"]
    assert misplaced(down) == []
    assert misplaced([Import("workflows.erasure.plan", "workflows.contracts.erasure", 5)]) == []
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


def test_workflow_code_reaching_an_activity_or_the_locator_is_caught() -> None:
    """Issue 41 item 3: the saga's plan reaching an activity or the platform; the verifier's workflow its checks."""
    assert misplaced([Import("workflows.erasure.plan", "activities.store_steps", 1)]) == [
        "workflows.erasure.plan:1 -> activities.store_steps: workflow code imports outside workflows"
    ]
    assert misplaced([Import("workflows.erasure.plan", "stores.platform", 2)]) == [
        "workflows.erasure.plan:2 -> stores.platform: workflow code imports outside workflows"
    ]
    assert misplaced([Import("verifier.workflow", "verifier.checks", 3)]) == [
        "verifier.workflow:3 -> verifier.checks: workflow code imports outside workflows"
    ]


def test_an_import_by_importlib_or_dunder_import_counts(tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text(
        "import importlib\nfrom importlib import import_module\n\n"
        "def load() -> None:\n"
        '    importlib.import_module("stores.platform")\n'
        '    import_module("activities.store_steps")\n'
        '    __import__("workers.settings")\n'
        "    importlib.import_module(name_from_elsewhere)\n",
        encoding="utf-8",
    )
    known = {**modules(), "workflows.erasure.planted": path}
    targets = {(imp.target, imp.line) for imp in imports_of("workflows.erasure.planted", path, known)}
    assert targets == {("stores.platform", 5), ("activities.store_steps", 6), ("workers.settings", 7)}
    assert len(misplaced(list(imports_of("workflows.erasure.planted", path, known)))) == 3


def test_a_store_added_by_its_entry_point_has_the_store_layer(tmp_path: Path) -> None:
    """A new store folder needs its entry point and nothing else: no list in this test to add it to."""
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    group = '[project.entry-points."erasure.adapters"]\n'
    assert group in text
    pyproject.write_text(text.replace(group, f'{group}notes = "stores.planted_notes.adapter:NotesAdapter"\n'))
    layers = layers_of_stores(store_folders(pyproject))
    assert layer_of("stores.planted_notes.adapter", layers) == (STORE_LAYER, "stores.planted_notes")
    assert layer_of("stores.planted_notes.adapter", LAYERS)[0] == -1  # without the entry point: in no layer
    assert misplaced([Import("stores.planted_notes.adapter", "stores.adapters.interface", 1)], layers) == []
    assert misplaced([Import("stores.planted_notes.adapter", "stores.memory.store", 2)], layers) == [
        "stores.planted_notes.adapter:2 -> stores.memory.store: a store imports another store"
    ]


def test_every_store_folder_has_its_entry_point() -> None:
    """A folder under stores/ that is neither shared nor named by an entry point would be in no layer: say which."""
    shared = {p for prefixes in LAYERS for p in prefixes if p.startswith("stores.")} - set(LAYERS[STORE_LAYER])
    folders = {f"stores.{p.name}" for p in (ROOT / "stores").iterdir() if (p / "__init__.py").exists()}
    assert folders - shared == set(LAYERS[STORE_LAYER])

"""The import contracts (``pyproject.toml``'s ``[tool.importlinter]``) hold, and each one fails on a planted import.

``lint-imports`` follows every import chain, direct or through other modules, between the folders: the layers
(bench, console, workers, activities, verifier, then workflows and stores apart), workflow code that reaches
nothing but ``workflows`` and ``temporalio``, nothing below ``workers`` that imports it, and store folders that
never import one another (the folders named by the ``erasure.adapters`` entry points). A planted import is
written into a copy of the tree and only that contract is checked there: it must break, and name the plant.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_contracts import store_folders

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("workflows", "activities", "verifier", "stores", "workers", "console", "bench")


def lint_imports(where: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` run in ``where`` (its ``pyproject.toml``, its packages first on the path), no cache."""
    args = [str(LINT_IMPORTS), "--no-cache", "--no-logo", *(f"--contract={c}" for c in contracts)]
    return subprocess.run(args, cwd=where, capture_output=True, text=True, timeout=120, check=False)


def copy_tree(to: Path) -> Path:
    """The packages, ``pyproject.toml`` and the contracts' helper module, as they are now, under ``to``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, to / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", to / "pyproject.toml")
    (to / "tests").mkdir()
    for name in ("__init__.py", "import_contracts.py"):
        shutil.copy(ROOT / "tests" / name, to / "tests" / name)
    return to


def plant(tree: Path, module: str, source: str) -> None:
    """Append ``source`` to ``module``'s file in the copy (created if it is new)."""
    path = tree.joinpath(*module.split(".")).with_suffix(".py")
    before = path.read_text(encoding="utf-8") if path.exists() else '"""Planted."""\n'
    path.write_text(f"{before}\n{source}\n", encoding="utf-8")


def test_every_contract_holds() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"Contracts: [1-9][0-9]* kept, 0 broken", run.stdout), run.stdout


def test_the_store_folders_are_the_entry_points_folders() -> None:
    folders = store_folders(ROOT / "pyproject.toml")
    assert "stores.memory" in folders
    assert "stores.physical" in folders  # vacuum and compaction: two entry points, one folder
    assert all((ROOT / f.replace(".", "/")).is_dir() for f in folders), folders
    assert not {"stores.adapters", "stores.infra", "stores.platform"} & set(folders)


PLANTS = [
    # a store's privacy primitive reaching up to the verifier
    pytest.param("layers", "stores.privacy.planted_up", "from verifier import checks", id="layers"),
    # the case: the saga's plan importing an activity module, then the locator
    pytest.param(
        "workflow-code", "workflows.erasure.plan", "from activities import store_steps", id="workflow-code-activity"
    ),
    pytest.param("workflow-code", "workflows.erasure.plan", "import stores.platform", id="workflow-code-platform"),
    pytest.param("below-workers", "activities.planted_settings", "from workers import settings", id="below-workers"),
    pytest.param("store-folders", "stores.memory.planted_peer", "from stores.sessions import adapter", id="stores"),
]


@pytest.mark.parametrize(("contract", "module", "source"), PLANTS)
def test_a_planted_import_breaks_its_contract(tmp_path: Path, contract: str, module: str, source: str) -> None:
    tree = copy_tree(tmp_path)
    assert lint_imports(tree, contract).returncode == 0  # the copy keeps it before the plant
    plant(tree, module, source)
    run = lint_imports(tree, contract)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 broken" in run.stdout, run.stdout
    assert module in run.stdout, run.stdout


def test_a_store_added_by_its_entry_point_is_independent_without_another_list(tmp_path: Path) -> None:
    """A new folder and its entry point, nothing else: the independence contract covers it at once."""
    tree = copy_tree(tmp_path)
    (tree / "stores" / "planted_notes").mkdir()
    plant(tree, "stores.planted_notes.__init__", "")
    plant(tree, "stores.planted_notes.adapter", "from stores.memory import adapter")
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    group = '[project.entry-points."erasure.adapters"]\n'
    assert group in text
    pyproject.write_text(
        text.replace(group, f'{group}planted_notes = "stores.planted_notes.adapter:NotesAdapter"\n'), encoding="utf-8"
    )
    assert "stores.planted_notes" in store_folders(pyproject)
    run = lint_imports(tree, "store-folders")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "stores.planted_notes.adapter" in run.stdout, run.stdout

"""The store folders of the import contracts, read from the entry points (``pyproject.toml``'s ``[tool.importlinter]``).

A store of the agent platform is one folder under ``stores/`` and one entry point in the ``erasure.adapters`` group.
The independence contract (no store folder imports another) and the layer test take their list of store folders
from those entry points, so adding a store by its entry point puts it under the rules without a second list to
keep. ``lint-imports`` loads :class:`StoreFoldersIndependence` by name (``contract_types``); it runs from the
repository's root, which it puts on ``sys.path``, and reads the entry points of the ``pyproject.toml`` there.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from importlinter.contracts.independence import IndependenceContract

#: the entry point group the registry loads the erase adapters from (``stores/adapters/registry.py``)
ADAPTER_GROUP = "erasure.adapters"


def store_folders(pyproject: Path) -> list[str]:
    """``stores.<folder>`` for every adapter entry point that lives under ``stores/`` (sorted, each once).

    An entry point of a platform's own package (outside ``stores/``) names no folder here: its package is not part
    of this repository's import graph.
    """
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    targets = project.get("entry-points", {}).get(ADAPTER_GROUP, {}).values()
    folders = {".".join(t.split(":")[0].split(".")[:2]) for t in targets if t.startswith("stores.")}
    return sorted(f for f in folders if f.count(".") == 1)


class StoreFoldersIndependence(IndependenceContract):
    """An independence contract whose ``modules`` are the store folders of the entry points, not a fixed list."""

    def __init__(self, name: str, session_options: dict[str, Any], contract_options: dict[str, Any]) -> None:
        options = {**contract_options, "modules": store_folders(Path.cwd() / "pyproject.toml")}
        super().__init__(name, session_options, options)

"""The lock files: every dependency pyproject.toml names is pinned, within its bounds, with file hashes, and
the image and CI install from them (deploy/locks/runtime.txt for the image, dev.txt for CI and ``make``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "deploy" / "locks"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def pins(lock: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a ``uv pip compile --generate-hashes`` output."""
    found: dict[str, tuple[str, int]] = {}
    current = ""
    for line in lock.read_text().splitlines():
        if m := PIN.match(line):
            current = canonicalize_name(m.group(1))
            found[current] = (m.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = found[current]
            found[current] = (version, hashes + 1)
    return found


def wanted(extra: str | None) -> list[Requirement]:
    names = list(PYPROJECT["project"]["dependencies"])
    if extra:
        names += PYPROJECT["project"]["optional-dependencies"][extra]
    return [Requirement(n) for n in names]


@pytest.mark.parametrize(("lock", "extra"), [("runtime.txt", None), ("dev.txt", "dev")])
def test_every_dependency_is_pinned_within_its_bounds_with_hashes(lock: str, extra: str | None) -> None:
    pinned = pins(LOCKS / lock)
    assert pinned, f"{lock} pins nothing"
    missing = [str(r) for r in wanted(extra) if canonicalize_name(r.name) not in pinned]
    assert not missing, f"{lock} lacks {missing}: run `make lock`"
    outside = [
        f"{r} (locked {pinned[canonicalize_name(r.name)][0]})"
        for r in wanted(extra)
        if not r.specifier.contains(pinned[canonicalize_name(r.name)][0], prereleases=True)
    ]
    assert not outside, f"{lock} pins outside pyproject.toml's bounds: {outside}: run `make lock`"
    unhashed = [name for name, (_v, hashes) in pinned.items() if hashes == 0]
    assert not unhashed, f"{lock} has pins without a hash: {unhashed}"


def test_the_tests_run_the_versions_the_image_ships() -> None:
    runtime, dev = pins(LOCKS / "runtime.txt"), pins(LOCKS / "dev.txt")
    differ = {n: (v, dev[n][0]) for n, (v, _h) in runtime.items() if n in dev and dev[n][0] != v}
    assert not differ, f"runtime.txt and dev.txt disagree (image, tests): {differ}"


def test_the_image_and_ci_install_from_the_locks_with_hashes_required() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "pip install --require-hashes -r deploy/locks/runtime.txt" in dockerfile
    assert re.search(r"pip install --no-deps \.", dockerfile), "the project itself must not resolve again"
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r $(LOCKS)/dev.txt" in makefile
    assert "--no-deps -e ." in makefile
    assert "-e '.[dev]'" not in makefile, "CI would resolve dependencies afresh"

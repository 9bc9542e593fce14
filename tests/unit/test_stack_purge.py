"""The local stack's root-owned Postgres directories go with their state directories: ``stack down --purge``
removes its own, ``stack up`` removes those whose state directory is gone, and nothing else is touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.errors import StackError
from workers.settings import Settings
from workers.stack import launcher, parts


@pytest.fixture
def pg_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    base = tmp_path / "var-lib"
    base.mkdir()
    monkeypatch.setattr(parts, "ROOT_PG_BASE", base)
    return base


def _settings(state: Path) -> Settings:
    return Settings.from_env({"ERASURE_STATE_DIR": str(state)})


def _base_for(state: Path, *, age: float = 3600.0, owner: bool = True) -> Path:
    base = parts.root_postgres_path(_settings(state))
    (base / "data").mkdir(parents=True)
    (base / "data" / "PG_VERSION").write_text("16\n")
    if owner:
        mark = base / parts.OWNER_FILE
        mark.write_text(str(state.resolve()))
        then = mark.stat().st_mtime - age
        os.utime(mark, (then, then))
    return base


def test_each_state_directory_has_its_own_path_and_asking_creates_nothing(pg_base: Path, tmp_path: Path) -> None:
    one, two = parts.root_postgres_path(_settings(tmp_path / "a")), parts.root_postgres_path(_settings(tmp_path / "b"))
    assert one != two
    assert one.parent == two.parent == pg_base
    assert parts.root_postgres_path(_settings(tmp_path / "a")) == one
    assert list(pg_base.iterdir()) == []


def test_prune_removes_exactly_the_orphans(pg_base: Path, tmp_path: Path) -> None:
    gone = _base_for(tmp_path / "deleted-state")
    kept_state = tmp_path / "live-state"
    kept_state.mkdir()
    kept = _base_for(kept_state)
    unmarked = _base_for(tmp_path / "old-unmarked", owner=False)
    recent = _base_for(tmp_path / "being-set-up", age=0)
    running = _base_for(tmp_path / "running-without-state")
    (running / "data" / "postmaster.pid").write_text(f"{os.getpid()}\n/data\n")
    install = pg_base / "pginstall-0123456789abcdef"
    install.mkdir()

    assert parts.prune_orphan_postgres() == [gone]
    assert not gone.exists()
    for left in (kept, unmarked, recent, running, install):
        assert left.is_dir(), left


def test_a_dead_postmaster_does_not_keep_an_orphan(pg_base: Path, tmp_path: Path) -> None:
    base = _base_for(tmp_path / "deleted")
    (base / "data" / "postmaster.pid").write_text("999999999\n")  # above pid_max: no such process
    assert parts.prune_orphan_postgres() == [base]


def test_remove_root_postgres_removes_its_own_only_when_stopped(pg_base: Path, tmp_path: Path) -> None:
    mine, other = _base_for(tmp_path / "mine"), _base_for(tmp_path / "other")
    (mine / "data" / "postmaster.pid").write_text(f"{os.getpid()}\n")
    with pytest.raises(StackError, match="still running"):
        parts.remove_root_postgres(_settings(tmp_path / "mine"))
    (mine / "data" / "postmaster.pid").unlink()
    assert parts.remove_root_postgres(_settings(tmp_path / "mine")) == mine
    assert not mine.exists()
    assert other.is_dir()
    assert parts.remove_root_postgres(_settings(tmp_path / "mine")) is None


def test_purge_removes_the_state_directory_and_its_postgres_directory(pg_base: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "run").mkdir(parents=True)
    (state / "secrets.json").write_text("{}")
    base = _base_for(state)
    removed = launcher.purge_state(_settings(state))
    assert not state.exists()
    if os.geteuid() == 0:
        assert removed == [base, state.resolve()]
        assert not base.exists()
    else:
        assert removed == [state.resolve()]


@pytest.mark.parametrize("where", ["not-a-state-dir", "cwd", "parent-of-cwd"])
def test_purge_refuses_what_is_not_a_state_directory(
    where: str, pg_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "something"
    (target / "keep").mkdir(parents=True)
    if where != "not-a-state-dir":
        (target / "run").mkdir()
        cwd = target if where == "cwd" else target / "keep"
        monkeypatch.chdir(cwd)
    with pytest.raises(StackError, match="not purged"):
        launcher.purge_state(_settings(target))
    assert (target / "keep").is_dir()


def test_stack_down_takes_purge() -> None:
    from workers.cli import build_parser

    args = build_parser().parse_args(["stack", "down", "--purge"])
    assert args.purge is True
    assert build_parser().parse_args(["stack", "down"]).purge is False

from __future__ import annotations

from pathlib import Path

import pytest

from stores.infra.migrate import discover


def test_shipped_migrations_are_ordered_and_unique() -> None:
    found = discover()
    assert [m.version for m in found] == sorted({m.version for m in found})
    assert found[0].version == 1


def test_bad_file_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / "1_x.sql").write_text("select 1")
    with pytest.raises(ValueError, match=r"NNNN_name\.sql"):
        discover(tmp_path)


def test_duplicate_versions_are_refused(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("select 1")
    (tmp_path / "0001_b.sql").write_text("select 1")
    with pytest.raises(ValueError, match="share a version"):
        discover(tmp_path)

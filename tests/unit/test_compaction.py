"""The compaction step's pure parts: which volumes a SeaweedFS vacuum compacted (by their revisions), how a
volume server's status reads, and where the step finds a master to ask (none in production by default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stores.infra.seaweedfs import Volume, not_compacted, volumes_of
from tests.unit.test_settings import _production_env
from workers.errors import ConfigError
from workers.settings import Settings


def vol(vid: int, *, garbage: int = 0, revision: int = 0, read_only: bool = False) -> Volume:
    return Volume("127.0.0.1:8080", vid, "erasure-artifacts", garbage, int(garbage > 0), revision, read_only)


def by_key(*volumes: Volume) -> dict[tuple[str, int], Volume]:
    return {v.key: v for v in volumes}


def test_a_volume_that_held_garbage_counts_as_compacted_only_when_its_revision_moved() -> None:
    held = vol(4, garbage=5, read_only=True)
    before = by_key(vol(1, garbage=49), vol(2, garbage=10), vol(3), held, vol(5, garbage=1))
    after = by_key(vol(1, revision=1), vol(2, garbage=10), vol(3), held)
    outcome = not_compacted(before, after)
    assert outcome.compacted == (("127.0.0.1:8080", 1),)
    assert outcome.left == (("127.0.0.1:8080", 2),)  # writable, garbage, same revision: the vacuum did not run
    assert outcome.read_only == (("127.0.0.1:8080", 4),)  # SeaweedFS skips read-only volumes: reported apart
    # 3 held no garbage (nothing to do); 5 is gone (moved or deleted): neither is left


def test_garbage_added_after_a_compaction_does_not_undo_it() -> None:
    before = by_key(vol(1, garbage=49, revision=3))
    assert not_compacted(before, by_key(vol(1, garbage=700, revision=4))).compacted == (("127.0.0.1:8080", 1),)
    assert not_compacted(before, by_key(vol(1, garbage=49, revision=3))).left == (("127.0.0.1:8080", 1),)


def test_a_volume_servers_status_reads_into_volumes() -> None:
    status = {
        "Version": "8000GB 4.48 pypi",
        "Volumes": [
            {"Id": 1, "Collection": "erasure-artifacts", "DeletedByteCount": 49, "DeleteCount": 1},
            {"Id": 7, "Collection": "erasure-logs", "ReadOnly": True},
        ],
    }
    volumes = volumes_of("10.0.0.5:8080", status)
    assert volumes[("10.0.0.5:8080", 1)] == Volume("10.0.0.5:8080", 1, "erasure-artifacts", 49, 1, 0, False)
    assert volumes[("10.0.0.5:8080", 1)].holds_garbage
    assert not volumes[("10.0.0.5:8080", 7)].holds_garbage
    assert volumes[("10.0.0.5:8080", 7)].read_only
    assert volumes_of("n", {"Volumes": None}) == {}


def test_the_local_stack_compacts_through_its_own_master_on_the_port_after_s3() -> None:
    local = Settings.from_env({"ERASURE_S3_PORT": "18333"})
    assert local.s3_compaction_master == "http://127.0.0.1:18334"
    given = Settings.from_env({"ERASURE_S3_COMPACTION_URL": "http://s3:9333/"})
    assert given.s3_compaction_master == "http://s3:9333"
    assert Settings.from_env({"ERASURE_S3_COMPACTION_URL": "none"}).s3_compaction_master is None
    # an S3 store that is not the local stack's: no compaction unless its master is named
    assert Settings.from_env({"ERASURE_S3_ENDPOINT": "http://minio:9000"}).s3_compaction_master is None


def test_production_offers_no_compaction_unless_a_master_is_named(tmp_path: Path) -> None:
    env = _production_env(tmp_path)
    assert Settings.from_env(env).s3_compaction_master is None  # AWS S3: not offered
    named = Settings.from_env({**env, "ERASURE_S3_COMPACTION_URL": "https://seaweed-master.internal:9333"})
    assert named.s3_compaction_master == "https://seaweed-master.internal:9333"


@pytest.mark.parametrize("value", ["s3:9333", "ftp://s3:9333", "http://s3:9333/vol/vacuum", "http://"])
def test_a_compaction_url_that_is_not_a_master_url_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="ERASURE_S3_COMPACTION_URL must be the SeaweedFS master's"):
        Settings.from_env({"ERASURE_S3_COMPACTION_URL": value})


def test_the_deletion_queue_marker_goes_through_the_local_filer_or_a_named_one() -> None:
    local = Settings.from_env({"ERASURE_S3_PORT": "18333"})
    assert local.s3_compaction_filer == "http://127.0.0.1:18338"  # the S3 port + 5, as S3Part starts it
    named = Settings.from_env(
        {"ERASURE_S3_COMPACTION_URL": "http://s3:9333", "ERASURE_S3_COMPACTION_FILER_URL": "http://s3:8888/"}
    )
    assert named.s3_compaction_filer == "http://s3:8888"
    # a named master without a named filer: the fixed wait (the local filer is not that master's)
    assert Settings.from_env({"ERASURE_S3_COMPACTION_URL": "http://s3:9333"}).s3_compaction_filer is None
    # no compaction, no marker; and 'none' turns the marker off
    assert Settings.from_env({"ERASURE_S3_COMPACTION_URL": "none"}).s3_compaction_filer is None
    assert Settings.from_env({"ERASURE_S3_COMPACTION_FILER_URL": "none"}).s3_compaction_filer is None


def test_a_filer_url_that_is_not_a_url_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="ERASURE_S3_COMPACTION_FILER_URL must be the SeaweedFS filer's"):
        Settings.from_env({"ERASURE_S3_COMPACTION_FILER_URL": "s3:8888"})

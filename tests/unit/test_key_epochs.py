"""Wrapping-key epochs, the pure logic: when an epoch rotates, when its KMS key may be deleted, the bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stores.privacy.key_epochs import Epoch, EpochPolicy
from workers.schedule import KEY_EPOCH_CHECK, key_epoch_input
from workers.settings import Settings

T0 = datetime(2025, 1, 1, tzinfo=UTC)
POLICY = EpochPolicy(period=timedelta(days=30), retention=timedelta(days=35), check_every=timedelta(days=1))


def test_the_first_run_opens_an_epoch_and_later_ones_only_once_the_current_is_a_period_old() -> None:
    assert POLICY.rotation_due(None, T0)
    assert not POLICY.rotation_due(T0, T0 + timedelta(days=29, hours=23))
    assert POLICY.rotation_due(T0, T0 + timedelta(days=30))
    assert POLICY.rotation_due(T0, T0 + timedelta(days=45))


def test_an_epoch_key_is_deleted_only_when_retired_unused_and_the_retention_passed() -> None:
    retired = T0 + timedelta(days=30)
    assert not POLICY.deletable(None, 0, T0 + timedelta(days=400))  # never retired
    assert not POLICY.deletable(retired, 1, retired + timedelta(days=400))  # a live data key still uses it
    assert not POLICY.deletable(retired, 0, retired + timedelta(days=34, hours=23))  # a backup may still need it
    assert POLICY.deletable(retired, 0, retired + timedelta(days=35))
    zero = EpochPolicy(timedelta(days=30), timedelta(0))
    assert zero.deletable(retired, 0, retired)  # retention 0: at once


def test_the_bound_is_one_period_plus_the_retention_plus_two_runs_of_the_job() -> None:
    shredded = T0 + timedelta(days=3, hours=5)
    assert POLICY.unwrappable_by(shredded) == shredded + timedelta(days=30 + 35 + 2)


def test_the_bound_holds_for_the_worst_case_schedule() -> None:
    """Walk the job day by day: an epoch opened just before the shred is rotated, retired and deleted by the
    bound, whatever the phase of the schedule."""
    for offset_hours in range(0, 24 * 31, 7):
        created = T0
        shredded = T0 + timedelta(hours=offset_hours)
        runs = [T0 + timedelta(hours=5) + i * POLICY.check_every for i in range(200)]
        retired_at = next(r for r in runs if r >= shredded and POLICY.rotation_due(created, r))
        deleted_at = next(r for r in runs if POLICY.deletable(retired_at, 0, r))
        assert deleted_at <= POLICY.unwrappable_by(shredded), offset_hours


def test_an_epoch_says_from_when_its_key_may_go() -> None:
    epoch = Epoch(2, "k", True, T0, retired_at=T0 + timedelta(days=30))
    assert epoch.deletable_from(POLICY) == T0 + timedelta(days=65)
    assert Epoch(3, "k", True, T0).deletable_from(POLICY) is None


def test_the_schedule_hands_the_settings_to_the_job() -> None:
    settings = Settings.from_env(
        {"ERASURE_KEY_EPOCH_DAYS": "7", "ERASURE_BACKUP_RETENTION_DAYS": "14", "ERASURE_KEY_EPOCH_REWRITE": "table"}
    )
    inp = key_epoch_input(settings)
    assert (inp.epoch_days, inp.retention_days, inp.rewrite) == (7, 14, "table")
    assert inp.check_hours == KEY_EPOCH_CHECK.total_seconds() / 3600

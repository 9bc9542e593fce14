"""The one identity validator every intake path uses (issue 27, item 7)."""

from __future__ import annotations

import pytest

from console.intake import csv_rows
from workers.service import RequestRefused, exact_user_id


@pytest.mark.parametrize("typed", [" bob", "bob ", "\tbob", "bob\n", "\u00a0bob", "bob\u2003"])
def test_a_typed_id_with_surrounding_whitespace_is_refused_and_the_reason_says_use_hex(typed: str) -> None:
    with pytest.raises(RequestRefused, match="in hex") as refused:
        exact_user_id(typed, None)
    assert typed.strip() not in str(refused.value)  # the reason never repeats the id


def test_the_same_id_in_hex_is_taken_exactly() -> None:
    assert exact_user_id(None, b" bob".hex()) == " bob"
    assert exact_user_id("", "20626f62") == " bob"  # an empty form field counts as not given


def test_exactly_one_form() -> None:
    for both in (("bob", "626f62"), (None, None), (None, "")):
        with pytest.raises(RequestRefused, match="exactly one"):
            exact_user_id(*both)


def test_an_empty_typed_id_is_left_to_the_emptiness_check() -> None:
    assert exact_user_id("", None) == ""  # validate_id then says "user id is empty"
    assert exact_user_id("", "") == ""


def test_inner_spaces_and_other_characters_stay_exact() -> None:
    assert exact_user_id("bob smith", None) == "bob smith"
    assert exact_user_id("Bob", None) == "Bob"


def test_a_csv_may_name_ids_in_hex() -> None:
    rows = csv_rows("app_name,user_id_hex\nsupport,20626f62\n")
    assert rows == [{"app_name": "support", "user_id_hex": "20626f62"}]
    with pytest.raises(ValueError, match="must name"):
        csv_rows("app_name,reason\nsupport,x\n")

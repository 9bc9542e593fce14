"""Free-text mentions of a raw id in log lines: only ids that cannot be ordinary words are matched."""

from __future__ import annotations

import pytest

from stores.logs import line_of_user, mentions


@pytest.mark.parametrize(
    ("text", "raw_id", "expected"),
    [
        ("support called alice@example.org about a refund", "alice@example.org", True),
        ("support called alice@example.org.", "alice@example.org", True),  # sentence end
        ("mail to alice@example.org.uk", "alice@example.org", False),  # a longer address
        ("handle user-42 asked again", "user-42", True),
        ("handle user-421 asked again", "user-42", False),
        ("bob asked again", "bob", False),  # too short to tell from a word
        ("asked for an inhaler refill today", "inhaler refill", False),  # plain words: other users' text
        ("the refund went through", "refund", False),
    ],
)
def test_mentions(text: str, raw_id: str, expected: bool) -> None:
    assert mentions(text, raw_id) is expected


def test_the_user_id_field_always_matches() -> None:
    line = {"app": "a", "user_id": "inhaler refill", "msg": "anything"}
    assert line_of_user(line, "a", "inhaler refill")
    assert not line_of_user({**line, "app": "b"}, "a", "inhaler refill")

"""The raw-file scanner (``tests/raw_scan.py``): each form of a needle is found wherever it sits in a file,
nothing else is, and compression hides it (why the raw-file test turns compression off)."""

from __future__ import annotations

import base64
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.raw_scan import Matcher, Pattern, describe, float32_pattern, scan, text_forms, text_patterns

WORD = "zqcanary5f3a9c01d2e4b6a8"


def noise(n: int) -> bytes:
    # no accidental start of the needle; no zero byte, which next to a UTF-16 form would make it the other order
    return os.urandom(n).replace(b"z", b"y").replace(b"\x00", b"\x01")


@pytest.mark.parametrize("form", ["utf-8", "utf-16-le", "utf-16-be", "hex"])
def test_each_plain_form_is_found_inside_other_bytes(form: str) -> None:
    data = noise(1000) + text_forms(WORD)[form] + noise(1000) + text_forms(WORD)[form]
    assert Matcher(text_patterns({"w": WORD})).count(data)[("w", form)] == 2


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_is_found_at_any_offset_of_the_encoded_stream(offset: int, encode: Callable[[bytes], bytes]) -> None:
    stream = encode(noise(offset) + f'{{"text": "a letter from {WORD}"}}'.encode() + noise(7))
    found = Matcher(text_patterns({"w": WORD})).count(stream)
    assert sum(n for (label, form), n in found.items() if label == "w" and form.startswith("base64")) >= 1


def test_only_the_needle_matches() -> None:
    middle = len(WORD) // 2  # (base64 forms leave out up to two bytes at each end: change one inside)
    other = WORD[:middle] + ("0" if WORD[middle] != "0" else "1") + WORD[middle + 1 :]
    data = b"".join(text_forms(other).values()) + noise(4096)
    assert not Matcher(text_patterns({"w": WORD})).count(data)


def test_compressed_text_is_invisible_to_a_byte_scan() -> None:
    value = " ".join(f"{WORD} and a sentence that repeats" for _ in range(50)).encode()
    assert Matcher(text_patterns({"w": WORD})).count(value)[("w", "utf-8")] == 50
    assert not Matcher(text_patterns({"w": WORD})).count(zlib.compress(value))


def test_a_vector_with_leading_zeros_is_found_by_its_varied_part() -> None:
    vector = [0.0] * 40 + [0.25, -0.5, 0.125] + [0.0] * 21
    pattern = float32_pattern("v", vector)
    data = bytes(5000) + pattern.data + bytes(5000)  # zeros everywhere: the anchor is not the zero run
    assert Matcher([pattern]).count(data) == {("v", "float32"): 1}
    assert not Matcher([pattern]).count(bytes(5000) + struct.pack("<64f", *([0.0] * 64)))


def test_an_empty_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        Matcher([Pattern("x", "bytes", b"")])


def test_scan_names_root_file_and_form_and_reads_paths(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "sub").mkdir(parents=True)
    (store / "sub" / "a.dat").write_bytes(noise(100) + WORD.encode("utf-16-le") + noise(100))
    (store / f"file-{WORD}.txt").write_bytes(b"nothing here")
    (store / "clean").write_bytes(noise(1000))
    skipped = store / "skipped"
    skipped.write_bytes(WORD.encode())
    result = scan({"store": [store], "single": [skipped]}, text_patterns({"w": WORD}), exclude={skipped})
    assert result.files == 4  # the skipped file is read once, as the root that names it
    assert result.of("w") == {"store:sub/a.dat": 1, f"store:file-{WORD}.txt": 1, "single:skipped": 1}
    assert {h.form for h in result.select(["w"], ["store"])} == {"utf-16-le", "path:utf-8"}
    assert "store:sub/a.dat (utf-16-le x1)" in describe(result.hits)
    assert describe([]) == "  (none)"

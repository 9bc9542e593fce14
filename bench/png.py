"""A tiny pure-Python PNG writer (zlib + struct) and a horizontal bar chart with a 3x5 pixel font."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

RGB = tuple[int, int, int]
SIGNATURE = b"\x89PNG\r\n\x1a\n"

# 3x5 glyphs, rows top to bottom; lower case is drawn as upper case.
_FONT: dict[str, str] = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111", "F": "111100110100100",
    "G": "011100101101011", "H": "101101111101101", "I": "111010010010111", "J": "001001001101010",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011", "R": "110101110101101",
    "S": "011100010001110", "T": "111010010010010", "U": "101101101101111", "V": "101101101101010",
    "W": "101101111111101", "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    " ": "000000000000000", ".": "000000000000010", "_": "000000000000111", "-": "000000111000000",
    ":": "000010000010000", "(": "010100100100010", ")": "010001001001010", "%": "101001010100101",
    "/": "001001010100100", "=": "000111000111000", "+": "000010111010000", ",": "000000000010100",
    "?": "111001010000010",
}  # fmt: skip


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, rgb: bytes | bytearray) -> bytes:
    """An 8-bit RGB PNG of ``width`` x ``height`` from row-major RGB bytes."""
    if width <= 0 or height <= 0 or len(rgb) != width * height * 3:
        raise ValueError("pixel buffer does not match the size")
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(rgb[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


class Canvas:
    def __init__(self, width: int, height: int, background: RGB = (255, 255, 255)) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, color: RGB) -> None:
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(self.width, x + w), min(self.height, y + h)
        if x1 <= x0 or y1 <= y0:
            return
        row = bytes(color) * (x1 - x0)
        for yy in range(y0, y1):
            start = (yy * self.width + x0) * 3
            self.pixels[start : start + len(row)] = row

    def text(self, x: int, y: int, text: str, color: RGB = (0, 0, 0), scale: int = 2) -> int:
        """Draw ``text``; returns the x just after it."""
        for ch in text:
            glyph = _FONT.get(ch.upper(), _FONT["?"])
            for i, bit in enumerate(glyph):
                if bit == "1":
                    self.rect(x + (i % 3) * scale, y + (i // 3) * scale, scale, scale, color)
            x += 4 * scale
        return x

    def png(self) -> bytes:
        return encode_png(self.width, self.height, self.pixels)


def text_width(text: str, scale: int = 2) -> int:
    return len(text) * 4 * scale


PALETTE: Sequence[RGB] = ((49, 110, 200), (230, 120, 40), (60, 160, 90), (190, 60, 60), (130, 90, 190))


def bar_chart(title: str, bars: Sequence[tuple[str, float]], unit: str = "s", width: int = 960) -> bytes:
    """A horizontal bar chart: one labelled bar per (label, value), value printed after the bar."""
    scale, row_h, margin = 2, 22, 16
    label_w = max([text_width(label, scale) for label, _ in bars] + [80]) + 2 * margin
    height = margin * 3 + 10 * scale + row_h * max(1, len(bars))
    canvas = Canvas(width, height)
    canvas.text(margin, margin, title, scale=scale)
    top = margin * 2 + 10 * scale
    biggest = max([v for _, v in bars] + [1e-9])
    value_w = text_width("00000.000" + unit, scale) + margin
    span = max(10, width - label_w - value_w - margin)
    canvas.rect(label_w - 1, top - 4, 1, row_h * len(bars) + 4, (120, 120, 120))
    for n, (label, value) in enumerate(bars):
        y = top + n * row_h
        canvas.text(margin, y + 4, label, scale=scale)
        length = max(1, round(span * value / biggest)) if value > 0 else 0
        canvas.rect(label_w, y + 2, length, row_h - 6, PALETTE[n % len(PALETTE)])
        canvas.text(label_w + length + 6, y + 4, f"{value:.3f}{unit}", (60, 60, 60), scale=scale)
    return canvas.png()

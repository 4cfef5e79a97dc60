"""Snapshots that hold text and structure exactly and numbers within a tolerance.

A figure's numbers come from float32 kernels, and those differ in the last bits from one x86 CPU to
another (AVX-512 on one, AVX2 on the next, `ATEN_CPU_CAPABILITY=default` on any). Rounded to four
significant digits, a value near a rounding boundary then prints one unit apart (0.04781 on one
machine, 0.04782 on another). So a snapshot compares every number it holds with a tolerance:

- integers (no point, no exponent) must be equal: counts, shapes, ids and positions never drift;
- other numbers may differ by RELATIVE of the larger, or by ABSOLUTE near zero.

One unit in the fourth significant digit is at most 1e-3 relative; float32 noise is far below it. A
real change to a figure (another layer, head, colour scale, token, rounding) moves numbers by more,
or changes text, and fails.
"""

from __future__ import annotations

import math
import re

from syrupy.extensions.amber import AmberSnapshotExtension

RELATIVE = 2e-3
ABSOLUTE = 1e-5
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|(?<![A-Za-z])[-+]?(?:inf|nan)(?![A-Za-z])")


def numbers_close(a: str, b: str) -> bool:
    """Whether two numbers as printed agree: integers exactly, others within the tolerance."""
    if a == b:
        return True
    if _is_integer(a) and _is_integer(b):
        return int(a) == int(b)
    x, y = float(a), float(b)
    if not (math.isfinite(x) and math.isfinite(y)):
        return x == y or (math.isnan(x) and math.isnan(y))
    return abs(x - y) <= max(ABSOLUTE, RELATIVE * max(abs(x), abs(y)))


def texts_match(actual: str, expected: str) -> bool:
    """Whether two serialized snapshots agree: the same text between numbers, the numbers close."""
    actual_numbers, expected_numbers = NUMBER.findall(actual), NUMBER.findall(expected)
    if NUMBER.split(actual) != NUMBER.split(expected) or len(actual_numbers) != len(expected_numbers):
        return False
    return all(numbers_close(a, b) for a, b in zip(actual_numbers, expected_numbers, strict=True))


def _is_integer(text: str) -> bool:
    return text.lstrip("+-").isdigit()


class TolerantAmberExtension(AmberSnapshotExtension):
    """syrupy's Amber snapshots, compared with `texts_match` instead of string equality."""

    def matches(self, *, serialized_data, snapshot_data) -> bool:
        if not isinstance(serialized_data, str) or not isinstance(snapshot_data, str):
            return serialized_data == snapshot_data
        return texts_match(serialized_data, snapshot_data)

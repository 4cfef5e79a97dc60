"""The snapshot comparison forgives float32's last-digit spread across CPUs and nothing else."""

from __future__ import annotations

import pytest

from tests.tolerant_snapshots import texts_match


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("'8.414e-05 0.07791 0.8742 0.04782 0'", "'8.414e-05 0.07791 0.8742 0.04781 0'"),  # AMD vs Intel
        ("'1.001 -3.2e-08'", "'1 1.1e-07'"),  # one unit of the 4th digit; noise around zero
        ("'info' 'banana'", "'info' 'banana'"),
    ],
)
def test_last_digit_differences_match(actual, expected):
    assert texts_match(actual, expected)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("'0.5 0.3'", "'0.5 0.31'"),  # a value that moved
        ("'head 6 · kv 2'", "'head 5 · kv 1'"),  # integers are exact
        ("'xaxis4'", "'xaxis3'"),
        ("'rgb(8,48,107)'", "'rgb(8,48,106)'"),
        ("'Blues'", "'Reds'"),  # text is exact
        ("'0.5 0.3'", "'0.5 0.3 0.2'"),  # so is the count of numbers
        ("'inf'", "'1e+38'"),
    ],
)
def test_real_changes_do_not_match(actual, expected):
    assert not texts_match(actual, expected)

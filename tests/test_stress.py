"""`python -m explorer.stress --quick`: the stress run itself works, end to end, in under a minute."""

from __future__ import annotations

import re

import pytest

from explorer.tools import stress

pytestmark = pytest.mark.slow


def test_a_quick_stress_run_has_no_failures_and_prints_its_table(capsys):
    assert stress.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "| requests | failures | p50 | p95 | worst request | GET / while it ran (max) | GET / (max)"
    )
    requests, failures = re.search(
        r"^\| (\d+) \(\d+ told the queue is full\) \| (\d+) \|", out, re.M
    ).groups()
    assert int(requests) > 30 and failures == "0"
    phases = ("concurrent", "prompts", "configs", "memory", "probe", "burst", "queue", "disk", "expensive")
    for category in phases:
        assert re.search(rf"^\| {category} \| \d+ \| 0 \|", out, re.M)

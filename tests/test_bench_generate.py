"""The generation benchmark runs end to end (`--generate --quick`, on a tiny model) so it cannot rot.
No time is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.tools.bench.generate import HEADINGS, NEW_TOKENS, PROMPT_TOKENS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-generate")
    command = [
        sys.executable,
        "-m",
        "explorer.bench",
        "--generate",
        "--quick",
        "--shape",
        "tiny",
        f"--out={out}",
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "generate-cpu.json").read_text()), (out / "generate-cpu.md").read_text()


def test_each_contender_generates_in_its_own_process_the_same_tokens(quick_results):
    results, _ = quick_results
    rows = results["rows"]
    assert [(row["round"], row["contender"]) for row in rows] == [(0, c) for c in HEADINGS]
    for row in rows:
        assert row["status"] == "ok", row
        assert len(row["all_seconds"]) == results["setup"]["repeats"] == 2
        assert row["load_average"] >= 0 and len(row["new_ids"]) == NEW_TOKENS
    assert results["summary"]["same_tokens"]  # greedy, one checkpoint: the same 32 tokens


def test_tokens_per_second_ratio_and_target_are_reported(quick_results):
    results, markdown = quick_results
    summary = results["summary"]
    assert results["setup"]["prompt_tokens"] == PROMPT_TOKENS
    for contender in HEADINGS:
        c = summary["contenders"][contender]
        assert c["tokens_per_second"] == pytest.approx(NEW_TOKENS / c["seconds"])
    ours, theirs = (summary["contenders"][c]["tokens_per_second"] for c in HEADINGS)
    assert summary["ratio"] == pytest.approx(ours / theirs)
    assert summary["target"]["met"] == (summary["ratio"] >= 1.0)
    for heading in HEADINGS.values():
        assert heading in markdown
    assert summary["target"]["rule"] in markdown

"""A circuit reading's working memory stays within what `limits.circuit_cost` reserves for it, measured
as the growth of a fresh process's resident memory on the real SmolLM2 (30 layers: a graph kept across
the layers' scores, or every step's gradients alive at once, shows as gigabytes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CHILD = """
import json, sys, threading, time
import torch
from explorer import explorer as explorer_module
from explorer.app import circuit_pairs, limits, memory
from explorer.engine import pairs
from explorer.views import circuits

path, methods, size, prefix = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
explorer = explorer_module.load(path)
chosen = circuit_pairs.chosen("built-in", "ioi", size, 0, "", None, explorer.tokenizer)
clean, corrupted, answers, distractors = chosen.args()
clean, corrupted = [prefix + c for c in clean], [prefix + c for c in corrupted]
data = pairs.dataset(explorer, clean, corrupted, answers, distractors)
explorer.run(clean[0])
memory.release()
before = memory.rss_bytes()
peak, done = [before], threading.Event()

def sample():
    while not done.is_set():
        peak[0] = max(peak[0], memory.rss_bytes())
        time.sleep(0.002)

sampler = threading.Thread(target=sample)
sampler.start()
circuits.find(explorer, data, methods)
done.set()
sampler.join()
n_tokens = max(batch.n_tokens for batch in data.batches)
cost = limits.circuit_cost(explorer.config, data.size, n_tokens, methods)
print(json.dumps({"grew": peak[0] - before, "reserved": cost.nbytes, "tokens": n_tokens}))
"""

LONG_PREFIX = "The river ran past the old mill and the quiet town, " * 6


@pytest.mark.parametrize(
    ("methods", "size", "prefix"),
    [("eap", 12, ""), ("eap", 3, LONG_PREFIX), ("exact,atp", 3, LONG_PREFIX)],
    ids=["eap-12-short", "eap-3-long", "nodes-3-long"],
)
def test_a_circuit_grows_the_process_by_no_more_than_its_reserved_cost(smollm2_path, methods, size, prefix):
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(smollm2_path), methods, str(size), prefix],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 < measured["grew"] <= measured["reserved"], measured

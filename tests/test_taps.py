"""The one forward's taps read what Hugging Face transformers' own hooks read at the same points, an
editing tap changes what follows it, and a forward split by a KV cache, or entered from a cached layer
input, gives what one whole forward gives."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer.engine.kv_cache import KVCache, PrefixCache
from explorer.engine.taps import Taps, recorder
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint

POINTS = ("block_input", "heads", "attention_output", "after_attention", "mlp_output", "block_output")


@pytest.fixture(scope="module", params=["llama-untied", "qwen2-bias", "gemma3-sliding"])
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu")


def read_every_tap(model, ids: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Each point's tensor in every layer, and the final normed state, as the taps see them."""
    seen = {point: [] for point in (*POINTS, "final")}

    def reader(point):
        return lambda layer, value: seen[point].append(value.clone())

    taps = Taps(**{point: reader(point) for point in (*POINTS, "final")})
    with torch.inference_mode():
        model.hidden_states(ids, taps=taps)
    return seen


def read_every_hook(hf_model, ids: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """The same points in transformers: a decoder layer's input and output, o_proj's input (the heads'
    outputs, concatenated) and output, the input of the norm before the MLP, what the MLP writes (Gemma:
    normed after it), the final norm's output."""
    seen = {point: [] for point in (*POINTS, "final")}
    handles = []

    def keep(point, value):
        seen[point].append(value.detach().clone())

    for layer in hf_model.model.layers:
        hook = layer.register_forward_pre_hook
        handles += [
            hook(
                lambda m, args, kwargs: keep("block_input", args[0] if args else kwargs["hidden_states"]),
                with_kwargs=True,
            ),
            layer.register_forward_hook(
                lambda m, args, out: keep("block_output", out[0] if isinstance(out, tuple) else out)
            ),
            layer.self_attn.o_proj.register_forward_pre_hook(lambda m, args: keep("heads", args[0])),
            layer.self_attn.o_proj.register_forward_hook(lambda m, args, out: keep("attention_output", out)),
        ]
        if hasattr(layer, "pre_feedforward_layernorm"):  # Gemma: the stream enters the norm before the MLP,
            handles += [  # and what the MLP writes is normed after it
                layer.pre_feedforward_layernorm.register_forward_pre_hook(
                    lambda m, args: keep("after_attention", args[0])
                ),
                layer.post_feedforward_layernorm.register_forward_hook(
                    lambda m, args, out: keep("mlp_output", out)
                ),
            ]
        else:
            handles += [
                layer.post_attention_layernorm.register_forward_pre_hook(
                    lambda m, args: keep("after_attention", args[0])
                ),
                layer.mlp.register_forward_hook(lambda m, args, out: keep("mlp_output", out)),
            ]
    handles.append(hf_model.model.norm.register_forward_hook(lambda m, args, out: keep("final", out)))
    try:
        with torch.no_grad():
            hf_model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def test_every_tap_reads_what_transformers_hooks_read_at_that_point(hf_pair):
    hf_model, ex = hf_pair
    ids = torch.tensor([ex.tokenizer.encode(PROMPT).ids])
    ours, theirs = read_every_tap(ex.model, ids), read_every_hook(hf_model, ids)
    n, c = ids.shape[1], ex.config
    for point in POINTS:
        assert len(ours[point]) == len(theirs[point]) == c.n_layers, point
        for layer, (mine, hf) in enumerate(zip(ours[point], theirs[point], strict=True)):
            if point == "heads":  # ours [1, H, N, d]; theirs concatenated [1, N, H·d]
                mine = mine.transpose(1, 2).reshape(1, n, c.n_heads * c.head_dim)
            assert mine.shape == hf.shape, (point, layer)
            torch.testing.assert_close(mine, hf, atol=1e-5, rtol=1e-5, msg=f"{point} of layer {layer}")
    torch.testing.assert_close(ours["final"][0], theirs["final"][0], atol=1e-5, rtol=1e-5)


def test_an_editing_tap_changes_what_follows_and_a_reading_tap_nothing(hf_pair):
    _, ex = hf_pair
    ids = torch.tensor([ex.tokenizer.encode(PROMPT).ids])
    with torch.inference_mode():
        plain = ex.model.hidden_states(ids)
        read = ex.model.hidden_states(ids, taps=Taps(mlp_output=lambda layer, value: None))
        zeroed = ex.model.hidden_states(ids, taps=Taps(mlp_output=lambda layer, value: value * 0))
        run = ex.run(PROMPT, ablate=[(1, h) for h in range(ex.config.n_heads)])
        no_heads = ex.model.hidden_states(
            ids, taps=Taps(attention_output=lambda layer, value: value * 0 if layer == 1 else None)
        )
    assert torch.equal(read, plain) and (zeroed - plain).abs().max() > 0.1
    # Every head of layer 1 zeroed is its attention output zeroed (o_proj has no bias here or zero bias).
    if ex.model.layers[1].self_attn.o_proj.bias is None:
        torch.testing.assert_close(run.final_hidden, no_heads[0], atol=1e-6, rtol=1e-6)


def test_a_forward_split_by_a_kv_cache_is_the_whole_forward(hf_pair):
    _, ex = hf_pair
    ids = torch.tensor([ex.tokenizer.encode(PROMPT).ids])
    n = ids.shape[1]
    with torch.inference_mode():
        whole = ex.model.hidden_states(ids)
        cache = KVCache(ex.config, n, dtype=torch.float32, device=torch.device("cpu"))
        first = ex.model.hidden_states(ids[:, :10], cache=cache)
        cache.length = 10
        rest = ex.model.hidden_states(ids[:, 10:], positions=range(10, n), cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, atol=1e-5, rtol=1e-5)


def test_blocks_entered_from_a_cached_layer_input_after_a_prefix_give_the_whole_forward(hf_pair):
    _, ex = hf_pair
    c = ex.config
    ids = torch.tensor([ex.tokenizer.encode(PROMPT).ids])
    n, start, layer = ids.shape[1], 7, 1
    inputs = torch.empty(c.n_layers, 1, n, c.hidden_size)
    cache = KVCache(c, n, dtype=torch.float32, device=torch.device("cpu"))
    with torch.inference_mode():
        whole = ex.model.hidden_states(ids, cache=cache, taps=Taps(block_input=recorder(inputs)))
        prefix = PrefixCache(cache.k[:, :, :start], cache.v[:, :, :start])
        rows = inputs[layer, :, start:].expand(3, -1, -1)  # three rows of the same stream
        later = ex.model.hidden_states(
            stream=rows, layers=range(layer, c.n_layers), positions=range(start, n), cache=prefix
        )
        last = ex.model.hidden_states(
            stream=rows,
            layers=range(layer, c.n_layers),
            positions=range(start, n),
            cache=prefix,
            last_only=True,
        )
    for row in range(3):
        torch.testing.assert_close(later[row], whole[0, start:], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(last[row, -1], whole[0, -1], atol=1e-5, rtol=1e-5)
    assert last.shape == (3, 1, c.hidden_size)

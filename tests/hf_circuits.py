"""Hugging Face transformers runs with hooks, as references for the circuit tests: every node kind read
where TransformerLens reads it (q_proj/k_proj/v_proj outputs, o_proj's input, a decoder layer's input,
the MLP's write), edited there, and each edge's downstream input rebuilt from its own stream."""

from __future__ import annotations

from contextlib import contextmanager

import torch


def is_gemma(hf_model) -> bool:
    return hasattr(hf_model.model.layers[0], "pre_feedforward_layernorm")


def mlp_writer(layer_module):
    """The module whose output is what the MLP writes into the stream."""
    return getattr(layer_module, "post_feedforward_layernorm", layer_module.mlp)


def mlp_reader(layer_module):
    """The norm before the MLP: its input is the stream the MLP reads, and nothing else reads it."""
    return getattr(layer_module, "pre_feedforward_layernorm", layer_module.post_attention_layernorm)


def head_slice(hf_model, head: int) -> slice:
    d = hf_model.config.head_dim
    return slice(head * d, (head + 1) * d)


@contextmanager
def hooks(hf_model, edit):
    """Call edit(point, layer, value) -> value or None at every point of every layer: "resid" (the
    decoder layer's input), "q", "k", "v" (projection outputs [B, N, heads·d]), "z" (o_proj's input),
    "attn" (o_proj's output), "mlp" (the MLP's write), "mlp_in" (the stream the MLP reads), "final"
    (the final norm's input)."""
    handles = []

    def pre(point, layer, with_kwargs=False):
        if with_kwargs:

            def hook(module, args, kwargs):
                value = args[0] if args else kwargs["hidden_states"]
                new = edit(point, layer, value)
                if new is None:
                    return None
                if args:
                    return (new, *args[1:]), kwargs
                return args, {**kwargs, "hidden_states": new}

            return hook
        return lambda module, args: (lambda new: None if new is None else (new, *args[1:]))(
            edit(point, layer, args[0])
        )

    def post(point, layer):
        return lambda module, args, output: edit(point, layer, output)

    for layer, block in enumerate(hf_model.model.layers):
        attn = block.self_attn
        handles.append(block.register_forward_pre_hook(pre("resid", layer, True), with_kwargs=True))
        for point in ("q", "k", "v"):
            handles.append(getattr(attn, f"{point}_proj").register_forward_hook(post(point, layer)))
        handles.append(attn.o_proj.register_forward_pre_hook(pre("z", layer)))
        handles.append(attn.o_proj.register_forward_hook(post("attn", layer)))
        handles.append(mlp_writer(block).register_forward_hook(post("mlp", layer)))
        handles.append(mlp_reader(block).register_forward_pre_hook(pre("mlp_in", layer)))
    n_layers = len(hf_model.model.layers)
    handles.append(hf_model.model.norm.register_forward_pre_hook(pre("final", n_layers)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def record(hf_model, ids: list[int]) -> tuple[dict, torch.Tensor]:
    """Every point's value in a plain run: {(point, layer): [N, ...]}, and the logits [N, vocab]."""
    seen = {}

    def edit(point, layer, value):
        seen[point, layer] = value[0].detach().clone()

    with torch.no_grad(), hooks(hf_model, edit):
        logits = hf_model(torch.tensor([ids])).logits[0]
    return seen, logits


def logit_diff(logits: torch.Tensor, answer: int, distractor: int) -> torch.Tensor:
    return logits[-1, answer] - logits[-1, distractor]


def head_writes(hf_model, seen: dict, layer: int) -> torch.Tensor:
    """What each head wrote: z_h · W_O[h]ᵀ, Gemma's norm after attention frozen at o_proj's output.
    # -> [H, N, hidden]"""
    config, block = hf_model.config, hf_model.model.layers[layer]
    z = seen["z", layer].view(-1, config.num_attention_heads, config.head_dim)  # [N, H, d]
    w_o = block.self_attn.o_proj.weight.view(config.hidden_size, config.num_attention_heads, config.head_dim)
    parts = torch.einsum("nhd,khd->hnk", z, w_o)
    if is_gemma(hf_model):
        y, norm = seen["attn", layer], block.post_attention_layernorm
        scale = (1.0 + norm.weight) * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + norm.eps)
        parts = parts * scale
    return parts


def writes(hf_model, seen: dict) -> torch.Tensor:
    """Every upstream node's write, in the engine's order (embedding, each layer's heads then MLP).
    # -> [U, N, hidden]"""
    parts = [seen["resid", 0][None]]
    for layer in range(len(hf_model.model.layers)):
        parts += [head_writes(hf_model, seen, layer), seen["mlp", layer][None]]
    return torch.cat(parts)


def project_heads(hf_model, layer: int, kind: str, inputs: torch.Tensor) -> torch.Tensor:
    """Each head's projection of its own input stream through the input norm.
    # inputs [heads, N, hidden] -> [N, heads·d]"""
    block = hf_model.model.layers[layer]
    proj = getattr(block.self_attn, f"{kind}_proj")
    heads, d = inputs.shape[0], hf_model.config.head_dim
    normed = block.input_layernorm(inputs)
    out = torch.einsum("hnk,hdk->nhd", normed, proj.weight.view(heads, d, -1))
    if proj.bias is not None:
        out = out + proj.bias.view(heads, d)
    return out.reshape(out.shape[0], heads * d)


def eap_one_step(hf_model, config, clean_ids, corrupted_ids, answer: int, distractor: int) -> torch.Tensor:
    """EAP with one step from hooked transformers: each writer's clean − corrupted write times the
    gradient of the logit difference at each reader's own input in the clean run, per position (the
    engine's writer and reader order). # -> [U, V, N]"""
    clean_seen, _ = record(hf_model, clean_ids)
    corrupted_seen, _ = record(hf_model, corrupted_ids)
    difference = writes(hf_model, clean_seen) - writes(hf_model, corrupted_seen)  # [U, N, hidden]
    n = len(clean_ids)
    heads = {"q": config.n_heads, "k": config.n_kv_heads, "v": config.n_kv_heads}
    leaves = {
        (kind, layer): torch.zeros(count, n, config.hidden_size, requires_grad=True)
        for layer in range(config.n_layers)
        for kind, count in heads.items()
    }
    for layer in range(config.n_layers):
        leaves["mlp", layer] = torch.zeros(n, config.hidden_size, requires_grad=True)
    leaves["final", config.n_layers] = torch.zeros(n, config.hidden_size, requires_grad=True)
    streams = {}

    def edit(point, layer, value):
        if point == "resid":
            streams[layer] = value[0]
        if point in heads:
            inputs = streams[layer][None] + leaves[point, layer]
            return project_heads(hf_model, layer, point, inputs)[None]
        if point in ("mlp_in", "final"):
            return value + leaves["mlp" if point == "mlp_in" else "final", layer]
        return None

    with hooks(hf_model, edit):
        logits = hf_model(torch.tensor([clean_ids])).logits[0]
    metric = logit_diff(logits, answer, distractor)
    grads = dict(zip(leaves, torch.autograd.grad(metric, list(leaves.values())), strict=True))
    per_reader = []
    for layer in range(config.n_layers):
        per_reader += [*grads["q", layer], *grads["k", layer], *grads["v", layer], grads["mlp", layer]]
    per_reader.append(grads["final", config.n_layers])
    return torch.einsum("unk,vnk->uvn", difference, torch.stack(per_reader))


def cut_edit(hf_model, reader, delta):
    """A hook edit in the clean run: `reader`'s input reads the stream less `delta` [N, hidden]."""
    kind, *where = reader
    streams = {}

    def edit(point, layer, value):
        if point == "resid":
            streams[layer] = value[0]
        if kind in ("q", "k", "v") and point == kind and layer == where[0]:
            value = value.clone()
            heads = value.shape[-1] // hf_model.config.head_dim
            inputs = streams[layer][None].expand(heads, -1, -1).clone()
            inputs[where[1]] -= delta
            value[0] = project_heads(hf_model, layer, kind, inputs)
            return value
        if ((kind, point) == ("mlp", "mlp_in") and layer == where[0]) or (kind, point) == ("logits", "final"):
            return value - delta
        return None

    return edit

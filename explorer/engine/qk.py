"""Why a head looks there: one pre-softmax score split into the sources that built it, exactly, with no
dictionary (QK attribution).

The stream entering a block is the sum of what was written into it: the embedding (× √hidden in Gemma),
each earlier head's z_h · W_O[h] (through Gemma's norm after attention, its scale frozen at the real
output's RMS), each o_proj bias, each earlier MLP's output (Gemma: after its own norm). With the input
norm's scale frozen at the real stream's RMS at the query and at the key, and QK-norm's at the real q's
and k's, a query and a key are linear in those parts; RoPE turns each part at its own position; so the
score is bilinear in them: table[s, t] = scale · ⟨q part s, k part t⟩, and the table sums to the scaled
score. b_Q and b_K are one more source on each side ("bias"). GQA: a head reads its kv head's keys.

- What each earlier block wrote comes from its cached input through its own attention alone
  (`Attention.heads` on the fast path, as the forward computed it, no MLP run): every head's output z
  there, and o_proj's output for Gemma's norm;
  an MLP's part is what its block added to the stream less what the attention wrote (the cached inputs
  of consecutive layers).
- `score_attribution`: one (query, key) of one head, the two positions' queries alone computed.
- `key_drivers`: each key-side source's part of the score at every key, the query side summed (the real
  rotated query). The weights between a key-side read and each earlier layer's heads are folded once
  (d × H·d); one layer at a time, [N, hidden] held, never every head's write at every position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine import rope
from explorer.engine.lens import check_position
from explorer.engine.model import Block
from explorer.engine.taps import Taps, tapped

Source = tuple[str, int | None, int | None]  # (kind, layer, head): what wrote a part of the stream


def sources(config, layer: int) -> list[Source]:
    """What wrote the stream entering `layer`, in the order of a table's rows: the embedding, then each
    earlier layer's heads, its o_proj bias (where the model has one) and its MLP; last the q/k biases
    (where the model has them)."""
    found: list[Source] = [("embedding", None, None)]
    for earlier in range(layer):
        found += [("head", earlier, head) for head in range(config.n_heads)]
        if config.o_bias:
            found.append(("o_bias", earlier, None))
        found.append(("mlp", earlier, None))
    if config.qkv_bias:
        found.append(("bias", None, None))
    return found


@dataclass(frozen=True, eq=False)
class ScoreAttribution:
    """One head's scaled score of `query` for `key`, split into query-side × key-side sources."""

    layer: int
    head: int
    query: int
    key: int
    query_sources: list[Source]
    key_sources: list[Source]
    table: torch.Tensor  # [S_q, S_k] float32: each pair's part; the parts sum to `score`
    score: float  # the scaled pre-softmax score, as the pipeline's "scaled" stage shows it
    allowed: bool  # whether the mask lets the query see the key (else the softmax gives it 0)


@dataclass(frozen=True, eq=False)
class KeyDrivers:
    """Each key-side source's part of one head's scaled score of `query` at every key."""

    layer: int
    head: int
    query: int
    sources: list[Source]
    parts: torch.Tensor  # [S, N] float32: column j sums to scores[j]; 0 at keys outside the mask
    scores: torch.Tensor  # [N] the scaled scores of the query at each key, 0 outside the mask


def _check(run, layer: int, head: int) -> None:
    run._check_layer(layer)
    n_heads = run.config.n_heads
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < n_heads:
        raise ValueError(f"head must be a whole number in [0, {n_heads - 1}], got {head!r}")
    if run.ablation is not None and run.ablation.mode == "mean":
        raise ValueError(
            "A score is split by what each head wrote at the query and at the key; a mean-ablated head "
            "writes its average over every position instead. Use zero ablation, or no ablation."
        )


def _attention_at(run, layer: int, p, kept: list[int] | None = None):
    """Every head's output (as the run's heads wrote it: its ablation applied) at positions `kept` of
    those `p` passes over (None: all), from `layer`'s cached input through the block's attention alone
    (no MLP); and the attention's output there where the model norms it (Gemma), whose scale needs it.
    # -> [H, R, d], [R, hidden] or None, float32"""
    model = run.explorer.model
    block, m = model.layers[layer], len(p.cos)
    rows = None if kept is None else torch.tensor(kept, device=run.layer_inputs.device)
    normed = block.attention_input(run.layer_inputs[layer, None, :m])  # [1, m, hidden]
    z = tapped(run.heads_tap, layer, block.self_attn.heads(normed, layer, p, rows))  # [1, H, R, d]
    y = block.self_attn.merge_heads(z)[0].float() if model.config.sandwich_norms else None
    return z[0].float(), y


def _pass(run, m: int):
    """What every earlier block's attention shares over positions 0..m−1: their RoPE tables and masks,
    and the run's knockouts. Its heads' outputs come from SDPA, as in the forward that wrote the cached
    stream (no stage of the attention is read here)."""
    return run.explorer.model.pass_over(
        range(m), run.layer_inputs.dtype, taps=Taps(knockout=run.taps.knockout)
    )


def _written_by_heads(block: Block, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What each head (and o_proj's bias) wrote at some positions, through the norm after attention
    where the model has one, its scale frozen at the real output y.  # z [H, P, d], y [P, hidden] ->
    [H (+1), P, hidden] float32"""
    attn = block.self_attn
    w_o = attn.o_proj.weight.float().view(-1, attn.n_heads, attn.head_dim)  # [hidden, H, d]
    parts = torch.einsum("hpd,khd->hpk", z, w_o)  # [H, P, hidden]
    if attn.o_proj.bias is not None:
        bias = attn.o_proj.bias.float().expand(1, z.shape[1], -1)  # [1, P, hidden]
        parts = torch.cat([parts, bias])
    scale = block.attention_write_scale(y)  # [P, hidden] or None
    return parts if scale is None else parts * scale


def _writes_at(run, layer: int, positions: list[int]) -> torch.Tensor:
    """What every source but the q/k biases wrote into the stream entering `layer` at `positions`
    (sorted), in the order of `sources`: an MLP's part is what its block added there less what the
    attention wrote.  # -> [S', P, hidden] float32"""
    p, inputs = _pass(run, positions[-1] + 1), run.layer_inputs
    parts = [inputs[0, positions].float()[None]]  # the embedding [1, P, hidden]
    for earlier in range(layer):
        z, y = _attention_at(run, earlier, p, positions)
        written = _written_by_heads(run.explorer.model.layers[earlier], z, y)  # [H (+1), P, hidden]
        added = (inputs[earlier + 1, positions] - inputs[earlier, positions]).float()
        parts += [written, (added - written.sum(0))[None]]
    return torch.cat(parts)


def _side(block: Block, proj: torch.nn.Linear, norm, index: int, parts, stream, real, position, inv_freq):
    """Each source's part of one head's query (or one kv head's key) at `position`: read through the
    input norm frozen at the real `stream`, projected by head `index`'s rows, the bias as one more part,
    scaled by QK-norm frozen at the `real` projection, turned by RoPE at `position`.
    # parts [S', hidden], stream [hidden], real [d] -> [S' (+1), d] float32"""
    d = real.shape[-1]
    weight = proj.weight.float().view(-1, d, proj.weight.shape[-1])[index]  # [d, hidden]
    inverse_rms, norm_weight = block.attention_input_factors(stream)
    projected = (parts * (inverse_rms * norm_weight)) @ weight.T  # [S', d]
    if proj.bias is not None:
        projected = torch.cat([projected, proj.bias.float().view(-1, d)[index][None]])
    if norm is not None:
        projected = projected * norm.scale(real)
    where = torch.tensor([position], device=projected.device)
    cos, sin = rope.cos_sin(rope.angles(where, inv_freq.to(projected.device)))  # [1, d] ×2
    return rope.apply_rope(projected, cos, sin)


@torch.inference_mode()
def score_attribution(run, layer: int, head: int, query: int, key: int) -> ScoreAttribution:
    """The scaled score of `head` in `layer`, `query` for `key`, split into query-side × key-side
    sources (see the module doc)."""
    _check(run, layer, head)
    query, key = check_position(run, query, "query"), check_position(run, key, "key")
    positions = sorted({query, key})
    writes = _writes_at(run, layer, positions)  # [S', P, hidden]
    block, p = run.explorer.model.layers[layer], run.projections(layer)
    attn, kv = block.self_attn, int(p.kv_head[head])

    def side(position, proj, norm, index, real):
        stream = run.layer_inputs[layer, position].float()
        parts = writes[:, positions.index(position)]
        return _side(block, proj, norm, index, parts, stream, real.to(writes.device), position, p.inv_freq)

    q_parts = side(query, attn.q_proj, attn.q_norm, head, p.q[head, query])  # [S, d]
    k_parts = side(key, attn.k_proj, attn.k_norm, kv, p.k[kv, key])  # [S, d]
    rows = run.attention_rows(layer, [query], head)
    named = sources(run.config, layer)
    return ScoreAttribution(
        layer=layer,
        head=head,
        query=query,
        key=key,
        query_sources=named,
        key_sources=list(named),
        table=(q_parts @ k_parts.T * p.scale).cpu(),
        score=float(rows.scaled[0, 0, key]),
        allowed=bool(rows.allowed[0, key]),
    )


@torch.inference_mode()
def key_drivers(run, layer: int, head: int, query: int) -> KeyDrivers:
    """Each key-side source's part of `head`'s scaled score of `query` at every key it may see, the
    query side summed (see the module doc)."""
    _check(run, layer, head)
    query = check_position(run, query, "query")
    model, p, config = run.explorer.model, run.projections(layer), run.config
    block, device = model.layers[layer], run.layer_inputs.device
    attn, kv, d = block.self_attn, int(p.kv_head[head]), config.head_dim
    seen = run.attention_rows(layer, [query], head)  # the query's row: its mask and scaled scores
    keys = torch.nonzero(seen.allowed[0]).flatten()  # [n] the keys it may see: a band, up to the query
    at = slice(int(keys[0]), query + 1)
    # A key-side part t at key j scores scale·⟨R_i q, R_j (s_k ⊙ W_K (ρ_j w ⊙ t))⟩ = ρ_j·⟨g_j, W_K (w ⊙ t)⟩:
    # g_j is the rotated query turned back to j, times QK-norm's scale and the attention's.
    cos, sin = rope.cos_sin(rope.angles(keys, p.inv_freq))  # [n, d] ×2
    g = rope.apply_rope(p.q_rot[head, query].expand(len(keys), -1), cos, -sin) * p.scale  # [n, d]
    if attn.k_norm is not None:
        g = g * attn.k_norm.scale(p.k[kv, keys])
    g = g.to(device)
    w_k = attn.k_proj.weight.float().view(-1, d, config.hidden_size)[kv]  # [d, hidden]
    inverse_rms, weight = block.attention_input_factors(run.layer_inputs[layer, at])  # [n, 1], [hidden]
    u = inverse_rms * (g @ w_k) * weight  # [n, hidden]: a part t at key j scores t · u_j
    rows = [(run.layer_inputs[0, at].float() * u).sum(-1)[None]]  # the embedding [1, n]
    every = _pass(run, query + 1)
    for earlier in range(layer):
        z, y = _attention_at(run, earlier, every)  # [H, m, d], [m, hidden] or None
        writer = model.layers[earlier].self_attn
        factors = model.layers[earlier].attention_write_factors(y[at]) if y is not None else None
        through = weight if factors is None else weight * factors[1]  # [hidden]
        sigma = inverse_rms if factors is None else inverse_rms * factors[0]  # [n, 1]
        # ⟨g_j, W_K diag(w ⊙ w_post) W_O[h] z⟩: the weights folded once, [d, H·d]
        folded = (w_k * through) @ writer.o_proj.weight.float()
        heads = ((g @ folded).view(len(keys), config.n_heads, d) * z[:, at].transpose(0, 1)).sum(-1)
        heads = (sigma * heads).T  # [H, n]
        rows.append(heads)
        written = heads.sum(0)
        if writer.o_proj.bias is not None:
            rows.append((sigma[:, 0] * (g @ ((w_k * through) @ writer.o_proj.bias.float())))[None])
            written = written + rows[-1][0]
        added = (run.layer_inputs[earlier + 1, at] - run.layer_inputs[earlier, at]).float()
        rows.append(((added * u).sum(-1) - written)[None])  # the MLP: the block's addition less attention's
    if attn.k_proj.bias is not None:
        rows.append((g @ attn.k_proj.bias.float().view(-1, d)[kv])[None])
    parts = torch.zeros(sum(len(r) for r in rows), run.n_tokens)
    parts[:, keys] = torch.cat(rows).cpu()
    scores = torch.zeros(run.n_tokens)
    scores[keys] = seen.scaled[0, 0, keys]
    return KeyDrivers(
        layer=layer, head=head, query=query, sources=sources(config, layer), parts=parts, scores=scores
    )

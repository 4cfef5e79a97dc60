"""How much each head reads what an earlier head writes, from the weights alone: Q-, K- and V-composition
(Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"), column-vector form.

Every weight-only factor is folded in, norm weights as the model applies them (1 + w in Gemma):
W_Q' = diag(w_qnorm)·W_Q[h]·diag(w_in), W_K' = diag(w_knorm)·W_K[kv]·diag(w_in), W_V' = W_V[kv]·diag(w_in),
W_O' = diag(w_post)·W_O[h] (w_post: Gemma's norm after attention; QK-norm weights only where the model has
them); W_QK = W_Q'ᵀ·W_K', W_OV = W_O'·W_V'. RoPE and every RMS factor are left out. For an earlier head
(W_OV) and a later one (W_QK, W_OV2):

    K = ‖W_QK·W_OV‖_F / (‖W_QK‖_F·‖W_OV‖_F)      Q = ‖W_QKᵀ·W_OV‖_F / (‖W_QK‖_F·‖W_OV‖_F)
    V = ‖W_OV2·W_OV‖_F / (‖W_OV2‖_F·‖W_OV‖_F)

Computed in the factored form, never a hidden × hidden product of two heads: ‖X·Y‖_F² = ⟨XᵀX, Y·Yᵀ⟩,
and each side's Gram is rank d, built from d × d Grams: for K, W_QKᵀW_QK = W_K'ᵀ(W_Q'W_Q'ᵀ)W_K' and
W_OV·W_OVᵀ = W_O'(W_V'W_V'ᵀ)W_O'ᵀ. Their inner products go a band of rows at a time, over the upper
triangle (both are symmetric): memory is one band of every head's Gram, the work one product of Grams
per pair of an earlier and a later head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine.model import Transformer

BAND_ROWS = 16  # rows of every head's hidden × hidden Gram held at once
LAYER_GROUP = 4  # later layers whose pairs one product computes (a few pairs with later earlier heads, 0)


@dataclass(frozen=True, eq=False)
class Composition:
    """Composition of earlier head (l1, h1) into later head (l2, h2), at [l1, h1, l2, h2]; 0 unless
    l1 < l2. float32 CPU."""

    q: torch.Tensor  # [L, H, L, H]
    k: torch.Tensor  # [L, H, L, H]
    v: torch.Tensor  # [L, H, L, H]


def folded(model: Transformer, layer: int) -> dict[str, torch.Tensor]:
    """One layer's heads' matrices with every weight-only factor folded in, float32.
    # q [H, d, hidden], k and v [H_kv, d, hidden], o [H, hidden, d]"""
    config, block = model.config, model.layers[layer]
    attn, d = block.self_attn, config.head_dim

    def applied(norm) -> torch.Tensor:  # a norm's weight as the model multiplies by it
        return norm.offset + norm.weight.float()

    w_in = applied(block.input_layernorm)  # [hidden]
    q = attn.q_proj.weight.float().view(config.n_heads, d, -1) * w_in
    k = attn.k_proj.weight.float().view(config.n_kv_heads, d, -1) * w_in
    v = attn.v_proj.weight.float().view(config.n_kv_heads, d, -1) * w_in
    if attn.q_norm is not None:
        q, k = q * applied(attn.q_norm)[:, None], k * applied(attn.k_norm)[:, None]
    o = attn.o_proj.weight.float().view(-1, config.n_heads, d).transpose(0, 1)  # [H, hidden, d]
    if config.sandwich_norms:
        o = o * applied(block.post_attention_layernorm)[:, None]
    return {"q": q, "k": k, "v": v, "o": o}


def _gram(x: torch.Tensor) -> torch.Tensor:
    """x·xᵀ over the last dimension, float64.  # [..., d, n] -> [..., d, d]"""
    x = x.double()
    return x @ x.transpose(-1, -2)


@torch.inference_mode()
def composition_scores(model: Transformer) -> Composition:
    """Q-, K- and V-composition of every earlier head into every later head (see the module doc)."""
    config = model.config
    n_layers, n_heads, d, hidden = config.n_layers, config.n_heads, config.head_dim, config.hidden_size
    kv = torch.arange(n_heads) // config.group_size
    # Each head's Grams as factors F·G (hidden × d by d × hidden): a later head's for K (W_K'ᵀ G_Q W_K'),
    # Q (W_Q'ᵀ G_K W_Q') and V (W_V'ᵀ G_O W_V'); an earlier head's W_O' G_V W_O'ᵀ. G: d × d Grams.
    later_f = torch.empty(n_layers, 3, n_heads, hidden, d)
    later_g = torch.empty(n_layers, 3, n_heads, hidden, d)  # G transposed: its bands are whole rows
    earlier_f = torch.empty(n_layers, n_heads, hidden, d)
    earlier_g = torch.empty(n_layers, n_heads, hidden, d)
    qk_norms, ov_norms = torch.empty(n_layers, n_heads), torch.empty(n_layers, n_heads)
    for layer in range(n_layers):
        w = folded(model, layer)
        q, k, v, o = w["q"], w["k"][kv], w["v"][kv], w["o"]  # each query head's
        gram_q, gram_k, gram_v = _gram(q), _gram(k), _gram(v)  # [H, d, d]
        gram_o = _gram(o.transpose(1, 2))
        for kind, (side, gram) in enumerate(((k, gram_q), (q, gram_k), (v, gram_o))):
            later_f[layer, kind] = side.transpose(1, 2)
            later_g[layer, kind] = (gram.float() @ side).transpose(1, 2)
        earlier_f[layer] = o
        earlier_g[layer] = o @ gram_v.float()
        qk_norms[layer] = (gram_q * gram_k).sum((1, 2)).clamp_min(0).sqrt()  # ‖W_QK‖_F
        ov_norms[layer] = (gram_o * gram_v).sum((1, 2)).clamp_min(0).sqrt()  # ‖W_OV‖_F
    shape = (n_layers, 3, n_heads, n_layers, n_heads)  # [l2, kind (K, Q, V), h2, l1, h1]
    squares = torch.zeros(shape, dtype=torch.float64)
    for first in range(0, hidden, BAND_ROWS):
        rows = slice(first, min(first + BAND_ROWS, hidden))
        # the band's upper triangle: 0 left of the diagonal, 1 on it, 2 right of it (both Grams symmetric)
        row_ids, col_ids = torch.arange(rows.start, rows.stop)[:, None], torch.arange(first, hidden)
        weight = (col_ids >= row_ids).float() + (col_ids > row_ids).float()  # [b, w]
        later = later_f[..., rows, :] @ later_g[..., first:, :].transpose(-1, -2)  # [L, 3, H, b, w]
        earlier = (
            earlier_f[..., rows, :] @ earlier_g[..., first:, :].transpose(-1, -2)
        ) * weight  # [L, H, b, w]
        for start in range(1, n_layers, LAYER_GROUP):
            stop = min(start + LAYER_GROUP, n_layers)  # later layers start..stop−1 meet layers before stop−1
            a = later[start:stop].flatten(3).flatten(0, 2)  # [g·3·H, b·w]
            b = earlier[: stop - 1].flatten(2).flatten(0, 1)  # [l·H, b·w]
            squares[start:stop, ..., : stop - 1, :] += (a @ b.T).view(
                stop - start, 3, n_heads, stop - 1, n_heads
            )
    by_qk = qk_norms[:, None, :, None, None] * ov_norms  # [l2, 1, h2, l1, h1]
    by_ov = ov_norms[:, None, :, None, None] * ov_norms
    scores = squares.clamp_min(0).sqrt() / torch.cat([by_qk, by_qk, by_ov], dim=1)
    earlier_first = torch.tril(torch.ones(n_layers, n_layers), diagonal=-1)[:, None, None, :, None]
    scores = (scores.float().nan_to_num(0.0) * earlier_first).permute(1, 3, 4, 0, 2)  # [kind, l1, h1, l2, h2]
    k, q, v = (t.contiguous() for t in scores)
    return Composition(q=q, k=k, v=v)

"""The decoder, top to bottom as data flows: embeddings (× √hidden in Gemma) -> blocks (RMSNorm,
attention (with QK-norm where the model has it; within a sliding window on Gemma's sliding layers),
RMSNorm, SwiGLU or GeGLU; Gemma norms what attention and the MLP write too) -> final norm -> LM head
(soft-capped where the config says). Module names follow HF Llama and Gemma 3 (minus the `model.`
prefix) so checkpoints map 1:1.

One forward, `Transformer.hidden_states`, serves every path that pushes a stream through blocks: a whole
prompt or a padded batch, a generation's prefill and decode steps (positions after a KV cache), an edited
or patched run, the patch sweep (blocks entered from a cached layer input, the last block computing the
last position alone). `Taps` read or edit the stream at named points along it. The block is written
here once; no other module calls its norms or its MLP (the eager path reaches the attention's input
through `Block.attention_input`).

Attention here is the fast path: PyTorch SDPA with `enable_gqa=True`, causal (or the banded mask of a
sliding layer, `rows.attention_mask`, less any cells knocked out), never materialising an N×N map; a
layer whose scores or pattern taps read attends stage by stage (`explorer.engine.rows`, the one
attention). The eager rerun is `explorer.engine.attention`, with these modules' weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from explorer.engine import deadline, rope
from explorer.engine.config import ModelConfig
from explorer.engine.rows import attention_mask, attention_rows, knocked_out
from explorer.engine.taps import NO_TAPS, Taps, tapped


class KeyValues(Protocol):
    """A KV cache as the attention uses it (`explorer.engine.kv_cache`)."""

    def update(
        self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every key and value up to the last new position, the new ones (positions start.. after RoPE)
        among them.  # [B, H_kv, M, d] ×2 -> [B, H_kv, start + M, d] ×2"""
        ...


@dataclass(frozen=True, kw_only=True)
class Pass:
    """What every block of one forward shares: the positions' RoPE tables (the sliding layers' own where
    their base differs), the first position, the KV cache of the positions before it, and the taps."""

    cos: torch.Tensor  # [M, d]
    sin: torch.Tensor  # [M, d]
    sliding_cos: torch.Tensor | None = None  # [M, d] (None: the sliding layers turn by cos, sin)
    sliding_sin: torch.Tensor | None = None
    start: int = 0  # position of the first of the M tokens
    cache: KeyValues | None = None
    taps: Taps = NO_TAPS
    stagewise: bool = False  # attend through the one attention (`rows`), as taps on scores or pattern do
    masks: dict[tuple, torch.Tensor] = field(default_factory=dict)  # built once a forward, by shape

    def rope(self, sliding: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """A layer's RoPE tables.  # -> [M, d] ×2"""
        if sliding and self.sliding_cos is not None:
            return self.sliding_cos, self.sliding_sin
        return self.cos, self.sin

    def mask(self, queries: torch.Tensor, n_keys: int, window: int | None) -> torch.Tensor:
        """The mask of queries at `queries` (positions) over `n_keys` keys (`rows.attention_mask`),
        built once for every layer of the forward that asks for it.  # [R] -> [R, keys] bool"""
        key = (tuple(queries.tolist()), n_keys, window)
        if key not in self.masks:
            self.masks[key] = attention_mask(queries, n_keys, window)
        return self.masks[key]


class RMSNorm(nn.Module):
    """x / RMS(x) · weight; with an `offset` (Gemma: 1), · (offset + weight), the product in float32."""

    def __init__(self, size: int, eps: float, offset: float = 0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps, self.offset = eps, offset

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """What the norm multiplies x by, elementwise: (offset + weight) / RMS(x).  # [..., size] float32"""
        inverse_rms, weight = self.factors(x)
        return inverse_rms * weight

    def factors(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`scale` as its two factors: 1 / RMS(x), and the weight as applied (offset + weight).
        # [..., size] -> [..., 1], [size] float32"""
        x32 = x.float()
        return torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps), self.offset + self.weight.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.offset:
            return (x32 * (self.offset + self.weight.float())).to(x.dtype)
        return self.weight * x32.to(x.dtype)


def rms_norm(config: ModelConfig, size: int) -> RMSNorm:
    return RMSNorm(size, config.rms_norm_eps, config.norm_offset)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        d, hidden = config.head_dim, config.hidden_size
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, d
        self.scale = config.attention_scale
        self.window = config.window(layer)  # keys a query sees up to itself (None: all, causal)
        self.q_proj = nn.Linear(hidden, config.n_heads * d, bias=config.qkv_bias)
        self.k_proj = nn.Linear(hidden, config.n_kv_heads * d, bias=config.qkv_bias)
        self.v_proj = nn.Linear(hidden, config.n_kv_heads * d, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.n_heads * d, hidden, bias=config.o_bias)
        self.q_norm = rms_norm(config, d) if config.qk_norm else None
        self.k_norm = rms_norm(config, d) if config.qk_norm else None

    def project(self, x: torch.Tensor):
        """Queries, keys and values before RoPE.  # x [B, N, hidden] -> [B, H, N, d], [B, H_kv, N, d] ×2"""
        return self.project_queries(x), *self.project_keys_values(x)

    def project_queries(self, x: torch.Tensor) -> torch.Tensor:
        """Queries before RoPE.  # x [B, N, hidden] -> [B, H, N, d]"""
        B, N, _ = x.shape
        return self.q_proj(x).view(B, N, self.n_heads, self.head_dim).transpose(1, 2)

    def project_keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys before RoPE, and values.  # x [B, N, hidden] -> [B, H_kv, N, d] ×2"""
        B, N, _ = x.shape
        k = self.k_proj(x).view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return k, v

    def qk_normed(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys RMS-normed over each head (QK-norm, qwen3), or as they are where the model
        has none.  # [B, H, N, d], [B, H_kv, N, d] -> same"""
        if self.q_norm is None:
            return q, k
        return self.q_norm(q), self.k_norm(k)

    def merge_heads(self, y: torch.Tensor) -> torch.Tensor:
        """Per-head outputs back to the residual stream.  # [B, H, N, d] -> [B, N, hidden]"""
        B, _, N, _ = y.shape
        return self.o_proj(y.transpose(1, 2).reshape(B, N, self.n_heads * self.head_dim))

    def heads(self, x: torch.Tensor, layer: int, p: Pass, kept: torch.Tensor | None = None) -> torch.Tensor:
        """Each head's output probs @ v, by SDPA.  # x [B, M, hidden] normed -> [B, H, M, d], or with `kept`
        (indices among the M) those positions' queries alone, over every key: [B, H, R, d]"""
        k, v = self.project_keys_values(x)
        k, v = tapped(p.taps.k, layer, k), tapped(p.taps.v, layer, v)
        q = tapped(p.taps.q, layer, self.project_queries(x if kept is None else x[:, kept]))
        q, k = self.qk_normed(q, k)
        cos, sin = p.rope(self.window is not None)
        k = rope.apply_rope(k, cos, sin)
        q = rope.apply_rope(q, cos, sin) if kept is None else rope.apply_rope(q, cos[kept], sin[kept])
        if p.cache is not None:
            k, v = p.cache.update(layer, p.start, k, v)  # [B, H_kv, start + M, d] ×2
        q = tapped(p.taps.queries, layer, q)
        n_queries, n_keys = q.shape[2], k.shape[2]
        where = torch.arange(n_keys - x.shape[1], n_keys, device=q.device)  # the M positions
        queries = where if kept is None else where[kept]  # [R]
        blocked = p.taps.blocked(layer, queries, n_keys)  # [H, R, keys] cells knocked out, or None
        if p.stagewise or p.taps.stagewise_at(layer):  # attention stage by stage (the one attention)
            allowed = knocked_out(p.mask(queries, n_keys, self.window), blocked)  # [R or H, R, keys]
            rows = attention_rows(
                q.float(), k.float(), queries, self.scale, self.window, layer, p.taps, allowed
            )
            return rows.mix(v.float()).to(q.dtype)
        # As many queries as keys, the last positions they reach: the causal mask (SDPA's own); queries
        # at the last key alone see every key (no mask); else the mask (cells knocked out joining it),
        # unless a sliding window cuts none.
        causal = kept is None and self.window is None and 1 < n_queries == n_keys and blocked is None
        sees_all = bool(queries.min() == n_keys - 1) and (self.window is None or n_keys <= self.window)
        mask = None if causal or (sees_all and blocked is None) else p.mask(queries, n_keys, self.window)
        mask = None if mask is None else knocked_out(mask, blocked)  # [R or H, R, keys]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True, scale=self.scale
        )

    def forward(self, x: torch.Tensor, layer: int, p: Pass, kept: torch.Tensor | None = None) -> torch.Tensor:
        """The attention's output.  # x [B, M, hidden] normed -> [B, M, hidden] ([B, R, hidden] `kept`)"""
        y = tapped(p.taps.heads, layer, self.heads(x, layer, p, kept))
        return tapped(p.taps.attention_output, layer, self.merge_heads(y))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)); GeGLU (Gemma) with gelu (tanh) in place of silu."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        hidden, inner, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)
        self.gelu = config.activation == "gelu_tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate_proj(x)
        gate = F.gelu(gate, approximate="tanh") if self.gelu else F.silu(gate)
        if torch.is_grad_enabled():  # training: autograd keeps each factor
            return self.down_proj(gate * self.up_proj(x))
        return self.down_proj(gate.mul_(self.up_proj(x)))  # no [M, inner] product allocated


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then + mlp(norm(x)). With sandwich norms (Gemma) what attention and
    the MLP write is normed too, and the norm before the MLP is `pre_feedforward_layernorm` (HF Gemma's
    `post_attention_layernorm` norms the attention's output)."""

    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        hidden = config.hidden_size
        self.input_layernorm = rms_norm(config, hidden)
        self.self_attn = Attention(config, layer)
        self.post_attention_layernorm = rms_norm(config, hidden)
        if config.sandwich_norms:
            self.pre_feedforward_layernorm = rms_norm(config, hidden)
            self.post_feedforward_layernorm = rms_norm(config, hidden)
        self.sandwich = config.sandwich_norms
        self.mlp = MLP(config)

    def attention_write_scale(self, y: torch.Tensor) -> torch.Tensor | None:
        """What the norm after attention multiplies the attention's output `y` by, elementwise, frozen
        at y's RMS: a head's part of y times it is that head's part of what is written (None: no such
        norm, the parts are written as they are).  # [..., hidden] -> [..., hidden] float32"""
        return self.post_attention_layernorm.scale(y) if self.sandwich else None

    def attention_written(self, y: torch.Tensor) -> torch.Tensor:
        """What the attention's output adds to the stream: itself, or normed (Gemma).  # [..., hidden]"""
        return self.post_attention_layernorm(y) if self.sandwich else y

    def mlp_output(self, x: torch.Tensor) -> torch.Tensor:
        """What the MLP adds to the stream after attention.  # [B, M, hidden] -> same"""
        if not self.sandwich:
            return self.mlp(self.post_attention_layernorm(x))
        return self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))

    def attention_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the attention reads: the stream entering the block, normed.  # [..., hidden] -> same"""
        return self.input_layernorm(x)

    def attention_input_factors(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the norm before attention multiplies the stream x by, frozen at x's RMS, as 1 / RMS(x) and
        the weight as applied: a part of x times both is that part of what the attention reads."""
        return self.input_layernorm.factors(x)

    def attention_write_factors(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`attention_write_scale` as its two factors (`RMSNorm.factors`); None: no such norm."""
        return self.post_attention_layernorm.factors(y) if self.sandwich else None

    def attend(self, x: torch.Tensor, layer: int, p: Pass, kept: torch.Tensor | None = None) -> torch.Tensor:
        """The attention's output, from the stream entering the block.  # [B, M, hidden] -> same
        ([B, R, hidden]: the `kept` positions, indices among the M)"""
        return self.self_attn(self.attention_input(x), layer, p, kept)

    def forward(self, x: torch.Tensor, layer: int, p: Pass, kept: torch.Tensor | None = None) -> torch.Tensor:
        """The stream through the block.  # [B, M, hidden] -> [B, M, hidden] ([B, R, hidden] `kept`)"""
        taps = p.taps
        x = tapped(taps.block_input, layer, x)
        attended = self.attend(x, layer, p, kept)
        if kept is not None:
            x = x[:, kept]
        x = tapped(taps.after_attention, layer, x + self.attention_written(attended))
        x = x + tapped(taps.mlp_output, layer, self.mlp_output(tapped(taps.mlp_input, layer, x)))
        return tapped(taps.block_output, layer, x)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        # left uninitialised (`init_weights` or a checkpoint sets it): on the meta device, nn.Embedding's
        # own normal_ init would import torch._dynamo (slow to import) for nothing
        embedding = torch.empty(config.vocab_size, config.hidden_size)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, _weight=embedding)
        self.layers = nn.ModuleList(Block(config, layer) for layer in range(config.n_layers))
        self.norm = rms_norm(config, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.register_buffer("inv_freq", rope.config_inverse_frequencies(config), persistent=False)
        sliding = rope.sliding_inverse_frequencies(config)  # None: the sliding layers turn as the rest
        self.register_buffer("sliding_inv_freq", sliding, persistent=False)
        self.forward_count = 0  # the forwards run so far (`hidden_states`): the app proves a switch adds none

    def layer_inv_freq(self, layer: int) -> torch.Tensor:
        """The θ_i `layer` turns its queries and keys by (a sliding layer's own base).  # [d/2]"""
        if self.config.window(layer) is not None and self.sliding_inv_freq is not None:
            return self.sliding_inv_freq
        return self.inv_freq

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The stream entering the first block.  # [B, M] -> [B, M, hidden]"""
        stream = self.embed_tokens(ids)
        if self.config.embedding_scale != 1.0:  # as HF Gemma: the scale cast to the weights' dtype first
            stream = stream * torch.tensor(self.config.embedding_scale, dtype=stream.dtype)
        return stream

    def logits(self, normed: torch.Tensor, token_ids: list[int] | None = None) -> torch.Tensor:
        """The LM head, soft-capped where the config says; only the columns of `token_ids` if given.
        # [..., hidden] -> [..., vocab] (or [..., len(token_ids)])"""
        if token_ids is None:
            logits = self.lm_head(normed)
        else:
            logits = F.linear(normed, self.lm_head.weight[token_ids])
        cap = self.config.final_logit_softcapping
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def init_weights(self, std: float = 0.02, generator: torch.Generator | None = None) -> None:
        """Fresh weights as HF Llama initialises them: N(0, std) matrices, zero biases, unit norms."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=std, generator=generator)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, RMSNorm):
                nn.init.constant_(module.weight, 1.0 - module.offset)

    def pass_over(
        self,
        positions: range,
        dtype: torch.dtype,
        cache: KeyValues | None = None,
        taps: Taps = NO_TAPS,
        stagewise: bool = False,
    ) -> Pass:
        """What the blocks share when they compute `positions` (consecutive); `stagewise`: attention
        through the one attention (`explorer.engine.rows`) instead of SDPA."""
        where = torch.arange(positions.start, positions.stop, device=self.inv_freq.device)
        cos, sin = rope.cos_sin(rope.angles(where, self.inv_freq), dtype)  # [M, d] ×2
        sliding = None, None
        if self.sliding_inv_freq is not None:
            sliding = rope.cos_sin(rope.angles(where, self.sliding_inv_freq), dtype)
        return Pass(
            cos=cos,
            sin=sin,
            sliding_cos=sliding[0],
            sliding_sin=sliding[1],
            start=positions.start,
            cache=cache,
            taps=taps,
            stagewise=stagewise,
        )

    def hidden_states(
        self,
        ids: torch.Tensor | None = None,
        *,
        stream: torch.Tensor | None = None,
        layers: range | None = None,
        positions: range | None = None,
        cache: KeyValues | None = None,
        taps: Taps = NO_TAPS,
        last_only: bool = False,
        kept: list[int] | None = None,
    ) -> torch.Tensor:
        """The one forward: the stream through `layers` (every block by default), then, when they end
        with the last block, the final norm.  # ids [B, M] or stream [B, M, hidden] -> [B, M, hidden]

        - `ids` are embedded; or `stream` is what enters the first of `layers` (a cached layer input).
        - `positions` of the M tokens (default 0..M−1); `cache` holds the keys and values of the ones
          before, and takes the new ones if it keeps them (`explorer.engine.kv_cache`).
        - `taps` read or edit the stream at their points (`Taps`).
        - `kept`: the last of `layers` computes these of the M positions (indices, in order) alone from
          its queries on (no later block reads the others); the stream returned is then [B, R, hidden].
          The keys and values of every position are still computed. `last_only`: the last one alone.
        A pass that embeds `ids`, or takes a stream through every block, is a forward (`forward_count`); a
        block rerun from a kept input is not."""
        layers = range(self.config.n_layers) if layers is None else layers
        if stream is None:
            if layers.start != 0:
                raise ValueError("token ids enter the first block; give the stream entering the others")
            stream = self.embed(ids)  # [B, M, hidden]
        positions = range(stream.shape[1]) if positions is None else positions
        if len(positions) != stream.shape[1]:
            raise ValueError(f"{len(positions)} positions for a stream of {stream.shape[1]}")
        p = self.pass_over(positions, stream.dtype, cache, taps)
        last = self.config.n_layers - 1
        self.forward_count += ids is not None or (layers.start == 0 and layers.stop == last + 1)
        if last_only:
            kept = [stream.shape[1] - 1]
        rows = None if kept is None else torch.tensor(kept, device=stream.device)
        for layer in layers:
            deadline.check()
            stream = self.layers[layer](stream, layer, p, rows if layer == layers[-1] else None)
        if layers.stop <= last:
            return stream
        return tapped(taps.final, self.config.n_layers, self.norm(stream))

    def final_norm(self, stream: torch.Tensor) -> torch.Tensor:
        """The final norm the forward applies after the last block; the logit lens reads any layer's
        stream through it (`explorer.engine.lens`).  # [..., hidden] -> same"""
        return self.norm(stream)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits for every position.  # [B, N] -> [B, N, vocab]"""
        return self.logits(self.hidden_states(ids))

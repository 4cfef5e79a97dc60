"""The eager path: one layer's attention, step by step, returned as data.

    q, k (projected) -> q_normed, k_normed (QK-norm, qwen3) -> q_rot, k_rot (RoPE) -> scores = q_rot·k_rotᵀ
      -> scaled = scores·scale
      -> masked (−inf where the mask forbids: causal, or a sliding layer's band) -> probs = softmax(masked)
      -> output

It goes through the block's own methods (`Block.attention_input`, `Attention.project`,
`Attention.merge_heads`), so the weights are the model's and nothing is duplicated; from the rotated
queries and keys on, it is the one attention (`explorer.engine.rows`), as is every other reading of
a layer's rows (`Projections.rows`). All internals are float32 whatever the model's dtype.

Memory: computing the layer holds none of its [H, N, N] stages: the output is mixed a block of rows at
a time (`AttentionRows.mix`). `probs`, `scores`, `scaled` and `masked` are computed from q_rot and
k_rot the first time they are read, then kept, and `head_stages(h)` gives one head's stages without
touching the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import torch

from explorer.engine import deadline, rope
from explorer.engine.model import Block
from explorer.engine.rows import AttentionRows, attention_rows
from explorer.engine.taps import NO_TAPS, Taps, tapped

ROUNDING_UNITS = 64  # float32 roundings two orders of the same sums may differ by (float32_tolerance)


def float32_tolerance(scale: float) -> float:
    """How far two float32 computations of the same sums in different orders (SDPA's kernel and the eager
    path, or another CPU's kernels) may differ, at values of magnitude `scale`: ROUNDING_UNITS roundings
    (2⁻²³ of the value each). K terms summed in another order move the sum by about √K roundings at the
    terms' scale; the sums here (probs @ v over N keys, o_proj over H·d inputs) have K up to a few
    thousand, and √4096 = 64."""
    return ROUNDING_UNITS * torch.finfo(torch.float32).eps * scale


def kv_head_map(n_heads: int, n_kv_heads: int) -> torch.Tensor:
    """Which key/value head each query head reads: h // (H // H_kv).  # [H] int64

    The one definition of GQA grouping; the maths and the plots both use it.
    """
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads {n_heads} is not a multiple of n_kv_heads {n_kv_heads}")
    return torch.arange(n_heads) // (n_heads // n_kv_heads)


@dataclass(frozen=True, eq=False)
class Projections:
    """What every stage of one layer's attention is computed from: linear in N, so it can be kept
    when the [H, N, N] maps cannot (`explorer.engine.blockwise` computes those a block of queries at a
    time)."""

    layer: int
    scale: float  # 1/√d
    angles: torch.Tensor  # [N, d/2] RoPE angle m·θ_i, radians
    inv_freq: torch.Tensor  # [d/2] θ_i
    q: torch.Tensor  # [H, N, d] the projection, before QK-norm (where the model has it) and RoPE
    k: torch.Tensor  # [H_kv, N, d] the same for keys
    v: torch.Tensor  # [H_kv, N, d]
    q_rot: torch.Tensor  # [H, N, d] after RoPE
    k_rot: torch.Tensor  # [H_kv, N, d] after RoPE
    kv_head: torch.Tensor  # [H] int64, which key/value head each query head reads
    value_norms: torch.Tensor  # [H, N] ‖v[g(h), j] · W_O[h]‖₂: what key j would write through head h
    q_normed: torch.Tensor | None = None  # [H, N, d] after QK-norm, before RoPE (None: no QK-norm)
    k_normed: torch.Tensor | None = None  # [H_kv, N, d]
    window: int | None = None  # a sliding layer's window: query i sees keys i − window < j ≤ i
    taps: Taps = field(default=NO_TAPS, repr=False)  # an edited run's: its knockouts and score edits

    @property
    def q_unrotated(self) -> torch.Tensor:
        """The queries RoPE turns: after QK-norm where the model has it.  # [H, N, d]"""
        return self.q if self.q_normed is None else self.q_normed

    @property
    def k_unrotated(self) -> torch.Tensor:
        """The keys RoPE turns.  # [H_kv, N, d]"""
        return self.k if self.k_normed is None else self.k_normed

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.q.shape[1]

    def rows(
        self,
        queries: range | list[int],
        head: int | None = None,
        n_keys: int | None = None,
        taps: Taps | None = None,
    ) -> AttentionRows:
        """The one attention's rows of `queries` (positions), every head or `head` alone, over keys
        0..n_keys−1 (default every key): the keys after the last query have probability 0, so a
        caller may leave them out. `taps` (default: the projections' own, an edited run's) see and edit
        the scores and the pattern, and knock cells out.  # stages [H or 1, Q, n_keys]"""
        n_keys = self.n_tokens if n_keys is None else n_keys
        taps = self.taps if taps is None else taps
        if isinstance(queries, range) and queries.step == 1:
            positions, picked = torch.arange(queries.start, queries.stop), slice(queries.start, queries.stop)
        else:
            positions = picked = torch.as_tensor(list(queries), dtype=torch.long)
        if head is not None and not 0 <= head < self.n_heads:
            raise ValueError(f"head must be in [0, {self.n_heads - 1}], got {head}")
        if head is None or taps.stagewise_at(self.layer):  # the taps read (and edit) every head at once
            q, k = self.q_rot[:, picked], self.k_rot[:, :n_keys]  # [H, Q, d], [H_kv, K, d]
            rows = attention_rows(q, k, positions, self.scale, self.window, self.layer, taps)
            return rows if head is None else rows.of_head(head, int(self.kv_head[head]))
        q, k = self.q_rot[head, picked][None], self.k_rot[self.kv_head[head], :n_keys][None]
        return attention_rows(q, k, positions, self.scale, self.window, self.layer, taps, head=head)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: value for name, value in vars(self).items() if isinstance(value, torch.Tensor)}


def _projected(name: str) -> property:
    """A field of the layer's projections, read as the internals' own."""
    return property(lambda self: getattr(self.projections, name), doc=f"`Projections.{name}`")


def _staged(name: str) -> property:
    """A stage of the layer's rows (`AttentionRows`), read as the internals' own."""
    return property(lambda self: getattr(self.rows, name), doc=f"`AttentionRows.{name}`")


@dataclass(frozen=True, eq=False)
class AttentionInternals:
    """Every stage of one layer's attention for one prompt (batch 1), float32: the projections it is
    computed from (each of their fields read as this one's: `att.q`, `att.k_rot` ...), the one
    attention's rows of every query, and the output."""

    projections: Projections
    rows: AttentionRows  # every query's rows over every key (`explorer.engine.rows`)
    output: torch.Tensor  # [N, hidden] the layer's attention output (after o_proj)

    layer = _projected("layer")
    scale = _projected("scale")  # 1/√d
    angles = _projected("angles")  # [N, d/2]
    inv_freq = _projected("inv_freq")  # [d/2]
    q = _projected("q")  # [H, N, d] before RoPE
    k = _projected("k")  # [H_kv, N, d] before RoPE
    v = _projected("v")  # [H_kv, N, d]
    q_rot = _projected("q_rot")  # [H, N, d] after RoPE
    k_rot = _projected("k_rot")  # [H_kv, N, d] after RoPE
    kv_head = _projected("kv_head")  # [H] int64
    q_normed = _projected("q_normed")  # [H, N, d] after QK-norm (None: the model has none)
    k_normed = _projected("k_normed")  # [H_kv, N, d]
    q_unrotated = _projected("q_unrotated")  # [H, N, d] what RoPE turns
    k_unrotated = _projected("k_unrotated")  # [H_kv, N, d]
    value_norms = _projected("value_norms")  # [H, N] ‖v_j · W_O[h]‖₂
    window = _projected("window")  # a sliding layer's window (None: causal)
    n_heads = _projected("n_heads")
    n_tokens = _projected("n_tokens")

    mask = _staged("allowed")  # [N, N] bool, True where a query may attend
    scores = _staged("scores")  # [H, N, N] raw Q·Kᵀ after RoPE, before scaling
    scaled = _staged("scaled")  # [H, N, N] scores · scale
    masked = _staged("masked")  # [H, N, N] scaled, −inf where the mask is False
    probs = _staged("probs")  # [H, N, N] softmax; rows sum to 1, masked entries exactly 0

    @cached_property
    def weighted_norms(self) -> torch.Tensor:
        """‖α[h,i,j] · v[g(h),j] · W_O[h]‖₂: each weight times the norm of what its key writes through the
        head (Kobayashi et al. 2020), so a key that gets weight but writes little (a sink) shrinks; 0
        where the mask forbids.  # [H, N, N]"""
        return self.probs * self.value_norms[:, None, :]

    def head_stages(self, head: int) -> dict[str, torch.Tensor]:
        """One head's scores, scaled, masked and probs, computed for that head alone (its probs are
        the layer's).  # each [N, N]"""
        rows = self.projections.rows(range(self.n_tokens), head)
        return {
            "scores": rows.scores[0],
            "scaled": rows.scaled[0],
            "masked": rows.masked[0],
            "probs": self.probs[head],
        }

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor held (the stages computed on demand among them, once read)."""
        own = {"output": self.output, "mask": self.rows.allowed}
        own |= {
            name: self.rows.__dict__[name]
            for name in ("scores", "scaled", "masked", "probs")
            if name in self.rows.__dict__
        }
        return self.projections.tensors() | own


@torch.inference_mode()
def project(
    block: Block, x: torch.Tensor, inv_freq: torch.Tensor, layer: int, taps: Taps = NO_TAPS
) -> Projections:
    """q, k, v of one layer, after QK-norm (where the model has it) and after RoPE, float32; `taps` edit
    q, k and v before both, as they did in the forward.  # x [N, hidden]: the stream entering the block"""
    deadline.check()
    n_tokens = x.shape[0]
    attn = block.self_attn
    q, k, v = attn.project(block.attention_input(x)[None])  # [1, H, N, d], [1, H_kv, N, d] ×2
    projected = tapped(taps.q, layer, q), tapped(taps.k, layer, k), tapped(taps.v, layer, v)
    q, k, v = (t[0].float() for t in projected)
    normed = None
    if attn.q_norm is not None:  # in the model's dtype, as the fast path norms them
        normed = tuple(t[0].float() for t in attn.qk_normed(*projected[:2]))
    q_in, k_in = normed or (q, k)
    angle = rope.angles(torch.arange(n_tokens, device=x.device), inv_freq)  # [N, d/2]
    cos, sin = rope.cos_sin(angle)  # [N, d] ×2
    return Projections(
        layer=layer,
        scale=attn.scale,
        angles=angle,
        inv_freq=inv_freq.float(),
        q=q,
        k=k,
        v=v,
        q_rot=rope.apply_rope(q_in, cos, sin),
        k_rot=rope.apply_rope(k_in, cos, sin),
        kv_head=kv_head_map(attn.n_heads, attn.n_kv_heads).to(x.device),
        value_norms=value_norms(attn, v),
        q_normed=normed[0] if normed else None,
        k_normed=normed[1] if normed else None,
        window=attn.window,
        taps=taps,
    )


@torch.inference_mode()
def value_norms(attn, v: torch.Tensor) -> torch.Tensor:
    """‖v[g(h), j] · W_O[h]‖₂ for every head and key, W_O[h] o_proj's columns of head h, as the quadratic
    form v·(W_O[h]ᵀ W_O[h])·v: H·d² per key where the products themselves cost H·d·hidden.
    # v [H_kv, N, d] float32 -> [H, N]"""
    H, d = attn.n_heads, attn.head_dim
    w_o = attn.o_proj.weight.float().view(-1, H, d).transpose(0, 1)  # [H, hidden, d]
    gram = w_o.transpose(1, 2) @ w_o  # [H, d, d]
    v = v[kv_head_map(H, attn.n_kv_heads).to(v.device)]  # [H, N, d]
    return ((v @ gram) * v).sum(-1).clamp_min(0).sqrt()


@torch.inference_mode()
def eager_attention(
    block: Block, x: torch.Tensor, inv_freq: torch.Tensor, layer: int, taps: Taps = NO_TAPS
) -> AttentionInternals:
    """Rerun one layer's attention step by step.  # x [N, hidden]: the stream entering the block

    `taps` edit q, k, v, the scores (and knock cells out) and the heads' outputs before o_proj as they did
    in the fast path (an edited or ablated run's), and read the scores and the pattern.
    """
    p = project(block, x, inv_freq, layer, taps)
    rows = p.rows(range(p.n_tokens), taps=taps)
    heads_out = tapped(taps.heads, layer, rows.mix(p.v)[None])  # [1, H, N, d]
    output = block.self_attn.merge_heads(heads_out.to(x.dtype))[0].float()  # [N, hidden]
    return AttentionInternals(p, rows=rows, output=output)

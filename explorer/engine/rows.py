"""The one attention: rows of a layer's attention for chosen queries over keys 0..K−1, stage by stage,
and the only place the mask and the softmax of scores are written.

    scores = q_rot · k_rotᵀ -> scaled = scores · scale -> masked (−∞ outside the mask) -> probs = softmax

- The mask (`attention_mask`): query i sees the keys j ≤ i, and in a sliding layer only the last
  `window` of them, i − window < j (HF's sliding_window_overlay). The fast path's SDPA takes it too.
- GQA: query head h reads kv head h // G (as `attention.kv_head_map` defines it); the heads of a group
  meet their kv head's keys in one product, and no key is copied per query head.
- Each stage is computed when first read. `probs` goes from scores to probabilities in one buffer a block
  of rows at a time, over the keys the block's queries may see (the others get 0, exactly), so beside the
  result it holds one block, and a causal layer costs about half the products.
- Taps (`Taps.scores`, `Taps.pattern`) see every row at once: the masked scores and the softmax.

Every reading computed stage by stage calls this: the eager rerun, a forward given those taps, the
blockwise and pooled views, head scores, flow weights and rollout, `attention_to`, generation rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from explorer.engine import deadline
from explorer.engine.taps import NO_TAPS, Taps, tapped

# `probs` and `mix` go a cell of query positions at a time (queries CELL·c .. CELL·(c+1)−1), each over
# the keys any query of the cell may see: the same keys for a query whoever asks for its row, so a
# layer's rows come out the same, bit for bit, whole or a block of queries at a time.
CELL = 64


def attention_mask(queries: torch.Tensor, n_keys: int, window: int | None) -> torch.Tensor:
    """True where a query at each of `queries` (positions) may attend to keys 0..n_keys−1: the keys up
    to itself, and with a sliding `window` only the last `window` of them (i − window < j ≤ i, as HF's
    sliding_window_overlay).  # [M] -> [M, n_keys] bool"""
    keys = torch.arange(n_keys, device=queries.device)[None, :]
    allowed = keys <= queries[:, None]
    if window is not None:
        allowed &= keys > queries[:, None] - window
    return allowed


def knocked_out(allowed: torch.Tensor, blocked: torch.Tensor | None) -> torch.Tensor:
    """The mask less the cells a knockout blocks (`Taps.knockout`: their scores −∞ before the softmax).
    # [R, K] bool, blocked [H, R, K] bool or None -> [H, R, K] (or `allowed` as it is)"""
    return allowed if blocked is None else allowed & ~blocked


def causal_mask(n_tokens: int, device: torch.device | str = "cpu", window: int | None = None) -> torch.Tensor:
    """The mask of a whole prompt: query i may attend to key j where j ≤ i (and i − window < j in a
    sliding layer).  # [N, N] bool"""
    return attention_mask(torch.arange(n_tokens, device=device), n_tokens, window)


def mask_(scores: torch.Tensor, scale: float, allowed: torch.Tensor) -> torch.Tensor:
    """In place: raw scores scaled, −∞ where `allowed` is False.  # [..., Q, K] -> same"""
    return scores.mul_(scale).masked_fill_(~allowed, -math.inf)


def softmax_(masked: torch.Tensor) -> torch.Tensor:
    """In place: each row of masked scores as probabilities (−∞ -> exactly 0).  # [..., Q, K] -> same"""
    masked.sub_(masked.amax(dim=-1, keepdim=True)).exp_()
    return masked.div_(masked.sum(dim=-1, keepdim=True))


def scores_of(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q · kᵀ of every query head against its kv head's keys: the heads that read one kv head meet its
    keys in one product, no key copied.  # q [..., H, R, d], k [..., H_kv, K, d] -> [..., H, R, K]"""
    *lead, n_heads, n_rows, d = q.shape
    n_kv = k.shape[-3]
    grouped = q.reshape(*lead, n_kv, n_heads // n_kv * n_rows, d)  # [..., H_kv, G·R, d]
    return (grouped @ k.transpose(-1, -2)).view(*lead, n_heads, n_rows, k.shape[-2])


@dataclass(frozen=True, eq=False)
class AttentionRows:
    """Attention rows of queries at `positions` over keys 0..K−1 (leading dims `...`: a batch, or the
    layers of a generation step). Stages are float32 when q and k are, each computed when first read."""

    q: torch.Tensor  # [..., H, Q, d] the queries after RoPE
    k: torch.Tensor  # [..., H_kv, K, d] the keys after RoPE
    positions: torch.Tensor  # [Q] int64: where each query stands (key j stands at j)
    scale: float
    allowed: torch.Tensor  # [Q, K] or [..., 1, Q, K] bool: True where a query may attend
    band: int | None = None  # a window every mask has (keys i − band < j only); None: causal somewhere
    layer: int = 0  # what taps are told
    taps: Taps = field(default=NO_TAPS, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        """[..., H, Q, K]"""
        return (*self.q.shape[:-1], self.k.shape[-2])

    @cached_property
    def scores(self) -> torch.Tensor:
        """Raw Q·Kᵀ after RoPE, before scaling.  # [..., H, Q, K]"""
        return scores_of(self.q, self.k)

    @cached_property
    def scaled(self) -> torch.Tensor:
        """scores · scale.  # [..., H, Q, K]"""
        return self.scores * self.scale

    @cached_property
    def masked(self) -> torch.Tensor:
        """scaled, −∞ where the mask forbids; as the taps leave it, where they read the scores.
        # [..., H, Q, K]"""
        masked = self.scaled.masked_fill(~self.allowed, -math.inf)
        return self._tapped(self.taps.scores, masked) if self.taps.stagewise_at(self.layer) else masked

    @cached_property
    def probs(self) -> torch.Tensor:
        """The softmax of each row; entries outside the mask exactly 0.  # [..., H, Q, K]"""
        if self.taps.stagewise_at(self.layer):  # the taps see (and may edit) every row at once
            return self._tapped(self.taps.pattern, softmax_(self.masked.clone()))
        probs = torch.empty(self.shape, dtype=self.q.dtype, device=self.q.device)
        for start, stop, low, high in self.blocks:
            deadline.check()  # a bounded request stops between two blocks
            block = self._raw(slice(start, stop), slice(low, high))  # [..., H, R, high − low]
            allowed = self.allowed[..., start:stop, low:high]
            probs[..., start:stop, low:high] = softmax_(mask_(block, self.scale, allowed))
            probs[..., start:stop, :low] = 0  # keys the block's queries never see
            probs[..., start:stop, high:] = 0
        return probs

    def of_head(self, head: int, kv_head: int) -> AttentionRows:
        """One head's rows, their stages those of every head's (so the taps saw every head at once).
        # stages [..., 1, Q, K]"""
        one = dataclasses.replace(
            self,
            q=self.q[..., head : head + 1, :, :],
            k=self.k[..., kv_head : kv_head + 1, :, :],
            allowed=self.allowed[head] if self.allowed.dim() == 3 else self.allowed,  # [Q, K], as one head's
            taps=NO_TAPS,
        )
        for stage in ("scores", "scaled", "masked", "probs"):
            one.__dict__[stage] = getattr(self, stage)[..., head : head + 1, :, :]
        return one

    def _tapped(self, tap, value: torch.Tensor) -> torch.Tensor:
        """`value` as a tap leaves it, shown with a batch dimension as a forward's (rows of one prompt:
        [1, H, Q, K])."""
        if self.q.dim() > 3:
            return tapped(tap, self.layer, value)
        return tapped(tap, self.layer, value[None])[0]

    def _raw(self, rows: slice = slice(None), keys: slice = slice(None)) -> torch.Tensor:
        """Raw scores of some rows and keys in a buffer of their own: a copy of `scores` when they were
        read (the same values), else their product.  # [..., H, R, k]"""
        if "scores" in self.__dict__:
            return self.scores[..., rows, keys].clone()
        return scores_of(self.q[..., rows, :], self.k[..., keys, :])

    @cached_property
    def blocks(self) -> list[tuple[int, int, int, int]]:
        """(first row, row after the last, first key, key after the last) of each block of rows `probs`
        and `mix` compute at once: the rows of one cell of positions, over every key a query of that
        cell may see (with taps: one block, every row and key)."""
        *_, n_rows, n_keys = self.shape
        if self.taps.stagewise_at(self.layer):
            return [(0, n_rows, 0, n_keys)]
        cells = (self.positions // CELL).tolist()
        blocks, start = [], 0
        for stop in range(1, n_rows + 1):
            if stop == n_rows or cells[stop] != cells[start]:
                first = cells[start] * CELL
                low = 0 if self.band is None else max(0, first - self.band + 1)
                blocks.append((start, stop, low, min(n_keys, first + CELL)))
                start = stop
        return blocks

    def mix(self, v: torch.Tensor) -> torch.Tensor:
        """Each head's output, probs @ v over its kv head's values, block by block over the keys each
        block's rows may see; when `probs` was not read (and no tap reads it), each block's rows are
        softmaxed and mixed at once, never held whole.  # v [..., H_kv, K, d] -> [..., H, Q, d]"""
        held = "probs" in self.__dict__ or self.taps.stagewise_at(self.layer)
        *lead, n_heads, n_rows, _ = self.shape
        n_kv = v.shape[-3]
        out = torch.empty(*lead, n_heads, n_rows, v.shape[-1], dtype=self.q.dtype, device=self.q.device)
        for start, stop, low, high in self.blocks:
            deadline.check()
            if held:
                block = self.probs[..., start:stop, low:high]  # [..., H, R, k]
            else:
                raw = self._raw(slice(start, stop), slice(low, high))
                block = softmax_(mask_(raw, self.scale, self.allowed[..., start:stop, low:high]))
            grouped = block.unflatten(-3, (n_kv, n_heads // n_kv))  # [..., H_kv, G, R, k]
            mixed = grouped @ v[..., None, low:high, :]  # [..., H_kv, G, R, d]
            out[..., start:stop, :] = mixed.flatten(-4, -3)
        return out


def attention_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    scale: float,
    window: int | Sequence[int | None] | None = None,
    layer: int = 0,
    taps: Taps = NO_TAPS,
    allowed: torch.Tensor | None = None,
    head: int | None = None,
) -> AttentionRows:
    """The rows of queries `q` standing at `positions` over keys `k` (key j at position j), masked as
    a layer with `window` masks them (None: causal), or with one window per leading index (a generation
    step's layers); `allowed`: that mask, already built (the layers of one forward share it); `head`:
    the one head `q` holds, whose cells alone a knockout blocks.
    # q [..., H, Q, d], k [..., H_kv, K, d], positions [Q]"""
    n_keys = k.shape[-2]
    if len(positions) and int(positions.max()) >= n_keys:
        raise ValueError(f"a query at {int(positions.max())} sees its own key, but there are {n_keys} keys")
    if isinstance(window, Sequence):  # [L, 1, Q, K]: each leading index's own mask
        allowed = torch.stack([attention_mask(positions, n_keys, w) for w in window])[:, None]
        band = None if None in window or not window else max(window)
    else:
        band = window
        if allowed is None:  # [Q, K], less the cells the taps knock out: [H, Q, K]
            blocked = taps.blocked(layer, positions, n_keys)  # [H, Q, K] or None
            if blocked is not None and head is not None:
                blocked = blocked[head]
            allowed = knocked_out(attention_mask(positions, n_keys, window), blocked)
    return AttentionRows(q, k, positions, scale, allowed, band, layer, taps)

"""Taps: the named points where a forward (and the eager rerun) lets a caller read or edit the stream.

A tap is called with the layer (n_layers for `final`) and the tensor at its point; it returns the tensor
to go on with, or None to leave it as it is (a tap that only reads). The names follow TransformerLens's
hooks where it has one for the point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Tap = Callable[[int, torch.Tensor], torch.Tensor | None]


@dataclass(frozen=True)
class Taps:
    """The points of the stream a forward reads or edits, in the order it passes them (M: positions
    computed; in the last block with `kept` positions, R of them from the queries on; K: keys).

    `scores` and `pattern` exist only where attention is computed stage by stage: the eager rerun
    (`engine.attention`, `engine.rows`), and a forward given either of them, whose layers then attend
    through `engine.rows` instead of SDPA (which never holds them); `stagewise_layers` names the layers
    they read (None: every layer), so the others keep SDPA. `knockout` is no point of the stream: it
    names the cells of a layer's attention to block before the softmax (their scores −∞), which SDPA
    takes as its mask and the one attention as part of its own."""

    block_input: Tap | None = None  # [B, M, hidden] the stream entering the block
    k: Tap | None = None  # [B, H_kv, M, d] k_proj's output, before QK-norm and RoPE (TL's hook_k)
    v: Tap | None = None  # [B, H_kv, M, d] v_proj's output (TL's hook_v)
    q: Tap | None = None  # [B, H, M, d] q_proj's output, before QK-norm and RoPE (TL's hook_q)
    queries: Tap | None = None  # [B, H, M, d] the queries after RoPE
    scores: Tap | None = None  # [B, H, M, K] scaled, −∞ outside the mask (TL's hook_attn_scores)
    pattern: Tap | None = None  # [B, H, M, K] the softmax (TL's hook_pattern)
    heads: Tap | None = None  # [B, H, M, d] each head's output probs @ v, before o_proj (TL's hook_z)
    attention_output: Tap | None = None  # [B, M, hidden] o_proj of the heads' outputs
    after_attention: Tap | None = None  # [B, M, hidden] the stream after attention (TL's resid_mid)
    mlp_input: Tap | None = None  # [B, M, hidden] the stream the MLP reads, before its norm; an edit
    # changes what the MLP reads alone, not the stream that goes on (TL's hook_mlp_in)
    mlp_output: Tap | None = None  # [B, M, hidden] what the MLP writes (after Gemma's norm)
    block_output: Tap | None = None  # [B, M, hidden] the stream leaving the block
    final: Tap | None = None  # [B, M, hidden] after the final norm
    # (layer, query positions [R], keys K) -> [H, R, K] bool, True where a cell is blocked; None: none
    knockout: Callable[[int, torch.Tensor, int], torch.Tensor | None] | None = None
    stagewise_layers: frozenset[int] | None = None  # the layers `scores` and `pattern` read (None: all)

    @property
    def stagewise(self) -> bool:
        """Whether attention must be computed stage by stage, at some layer, for these taps to see it."""
        return self.scores is not None or self.pattern is not None

    def stagewise_at(self, layer: int) -> bool:
        """Whether `layer`'s attention must be computed stage by stage for these taps to see it."""
        return self.stagewise and (self.stagewise_layers is None or layer in self.stagewise_layers)

    def blocked(self, layer: int, queries: torch.Tensor, n_keys: int) -> torch.Tensor | None:
        """The cells of `layer` these taps block.  # queries [R] positions -> [H, R, n_keys] bool, or None"""
        return None if self.knockout is None else self.knockout(layer, queries, n_keys)

    def then(self, other: Taps) -> Taps:
        """These taps, then `other`'s at each point (what this one leaves, `other` sees: an edit, then
        a recorder of what the forward goes on with)."""
        joined = {}
        for name in POINTS:
            first, second = getattr(self, name), getattr(other, name)
            joined[name] = _chained(first, second) if first and second else first or second
        if self.knockout and other.knockout:
            raise ValueError("two knockouts on one forward: give their cells as one")
        layers = [taps.stagewise_layers for taps in (self, other) if taps.stagewise]  # None: every layer
        stagewise = None if not layers or None in layers else frozenset().union(*layers)
        return Taps(**joined, knockout=self.knockout or other.knockout, stagewise_layers=stagewise)


NO_TAPS = Taps()
POINTS = tuple(
    name for name in Taps.__dataclass_fields__ if name not in ("knockout", "stagewise_layers")
)  # the points of the stream, in the order a forward passes them


def _chained(first: Tap, second: Tap) -> Tap:
    def chained(layer: int, value: torch.Tensor) -> torch.Tensor | None:
        edited = tapped(first, layer, value)
        after = second(layer, edited)
        return edited if after is None else after

    return chained


def recorder(store: torch.Tensor) -> Tap:
    """A tap that writes what passes into `store[layer]` and leaves it as it is."""

    def record(layer: int, value: torch.Tensor) -> None:
        store[layer].copy_(value)

    return record


def tapped(tap: Tap | None, layer: int, value: torch.Tensor) -> torch.Tensor:
    """`value` as `tap` leaves it."""
    if tap is None:
        return value
    edited = tap(layer, value)
    return value if edited is None else edited

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
    through `engine.rows` instead of SDPA (which never holds them)."""

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

    @property
    def stagewise(self) -> bool:
        """Whether attention must be computed stage by stage for these taps to see it."""
        return self.scores is not None or self.pattern is not None


NO_TAPS = Taps()


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

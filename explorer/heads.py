"""What each head does, as numbers: reductions of one layer's softmax maps to one score per head.

All functions take `probs` [H, N, N] (rows sum to 1, causal) and return [H]. `prompt_profile` sweeps
every layer of a run one at a time and keeps only the [L, H] reductions, never every layer's maps.
"""

from __future__ import annotations

import torch

PROFILE_SCORES = ("previous_token", "sink", "entropy", "distance")


def previous_token_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention from position i to i−1, over i ≥ 1.  # [H, N, N] -> [H]"""
    return probs.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def sink_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention to position 0, over queries i ≥ 1 (position 0 can only attend to itself)."""
    return probs[:, 1:, 0].mean(-1)


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Mean row entropy in nats (0: one key takes everything; log(i+1): uniform over the past)."""
    return -(probs * probs.clamp_min(1e-30).log()).sum(-1).mean(-1)


def mean_distance(probs: torch.Tensor) -> torch.Tensor:
    """Mean over queries of the expected distance i − j to the attended key, in tokens."""
    n = probs.shape[-1]
    positions = torch.arange(n, dtype=probs.dtype, device=probs.device)
    distance = (positions[:, None] - positions[None, :]).clamp_min(0)  # [N, N]
    return (probs * distance).sum(-1).mean(-1)


def induction_score(probs: torch.Tensor, period: int) -> torch.Tensor:
    """For a sequence whose tokens repeat with `period` (a random block written twice, possibly after
    a prefix that ends `period` tokens before the second copy starts), the mean attention from each
    token of the second copy to the token right after its earlier occurrence: i -> i − period + 1.
    # [H, N, N] -> [H]"""
    n = probs.shape[-1]
    if not 1 <= period < n:
        raise ValueError(f"period must be in [1, {n - 1}], got {period}")
    return probs.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[:, period:].mean(-1)


def layer_profile(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every profile score of one layer.  # [H, N, N] -> {name: [H]}"""
    return {
        "previous_token": previous_token_score(probs),
        "sink": sink_score(probs),
        "entropy": entropy(probs),
        "distance": mean_distance(probs),
    }


def prompt_profile(run) -> dict[str, torch.Tensor]:
    """Every profile score for every layer and head of a run, one layer in memory at a time.
    # -> {name: [L, H]}"""
    rows = [layer_profile(run.attention(layer, remember=False).probs) for layer in range(run.config.n_layers)]
    return {name: torch.stack([row[name] for row in rows]) for name in PROFILE_SCORES}

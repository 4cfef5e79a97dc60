"""Attention weighted by what each key writes (Kobayashi et al. 2020, "Attention is not only a weight"):
‖α_ij · v_j · W_O[h]‖ (`AttentionInternals.weighted_norms`) shown as each row over its sum, so a row
sums to 1 as attention does, and a key that gets weight but writes little (a sink) fades.

    key_shares    a block of rows' shares and the rows' sums, from α and each key's ‖v·W_O‖
    key_writes    what a weighted map's hover shows beside each share (`figures.KeyWrites`)
"""

from __future__ import annotations

import torch

from explorer.figures import KeyWrites


def key_shares(probs: torch.Tensor, value_norms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each ‖α_ij·v_j·W_O‖ over its row's sum: rows sum to 1, 0 where the mask forbids (and all 0 in a
    row whose keys write nothing). Rows may stop at their last query's key (the rest are 0).
    # probs [..., R, K], value_norms [..., K] (or more keys) -> shares [..., R, K], row sums [..., R]"""
    norms = probs * value_norms[..., None, : probs.shape[-1]]  # as AttentionInternals.weighted_norms
    sums = norms.sum(-1)
    return norms.div_(sums.clamp_min(torch.finfo(torch.float32).tiny)[..., None]), sums


def key_writes(probs: torch.Tensor, value_norms: torch.Tensor, sums: torch.Tensor) -> KeyWrites:
    """A weighted map's hover data: its α [R, K], its keys' ‖v·W_O‖ [K] and its rows' sums [R]."""
    return KeyWrites(probs=probs.numpy(), value_norms=value_norms.numpy(), row_sums=sums.numpy())

"""Keys and values of earlier positions, as the one forward reads them (`Transformer.hidden_states`'s
`cache`): every layer's rotated keys and values of the kv heads only, so under GQA a cache is H / H_kv
times smaller than the same model's as multi-head attention.

    KVCache      a generation's: batch 1, preallocated to the length it can reach; each forward writes
                 its positions' keys and values and reads every one up to them
    PrefixCache  the patch sweep's: the positions before the first that differs, read by every row of a
                 batch that recomputes the positions after them, and never written
"""

from __future__ import annotations

import torch

from explorer.engine.config import ModelConfig


class KVCache:
    """Rotated keys and values of every layer, kv heads only, preallocated; positions 0..length−1 filled."""

    def __init__(self, config: ModelConfig, capacity: int, *, dtype: torch.dtype, device: torch.device):
        shape = (config.n_layers, config.n_kv_heads, capacity, config.head_dim)
        self.k = torch.empty(shape, dtype=dtype, device=device)  # [L, H_kv, capacity, d] after RoPE
        self.v = torch.empty(shape, dtype=dtype, device=device)  # [L, H_kv, capacity, d]
        self.length = 0  # positions filled; the caller moves it once every layer holds the new ones

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def update(
        self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new positions' keys and values, and read every one up to them.
        # [1, H_kv, M, d] ×2 -> [1, H_kv, start + M, d] ×2"""
        end = start + k.shape[2]
        self.k[layer, :, start:end] = k[0]
        self.v[layer, :, start:end] = v[0]
        return self.k[layer, :, :end][None], self.v[layer, :, :end][None]

    def nbytes(self) -> int:
        """Bytes allocated: K and V for every position the generation can reach."""
        return self.k.nbytes + self.v.nbytes

    def used_nbytes(self, length: int | None = None) -> int:
        """Bytes the filled positions hold (or the first `length`): K and V of every layer, kv heads only."""
        length = self.length if length is None else length
        return sum(t[:, :, :length].nbytes for t in (self.k, self.v))


class PrefixCache:
    """The keys and values of positions 0..length−1 of every layer, shared by every row of a batch."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v  # [L, H_kv, P, d] each, after RoPE

    @property
    def length(self) -> int:
        return self.k.shape[2]

    def update(
        self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The prefix's keys and values before each row's own.
        # [R, H_kv, M, d] ×2 -> [R, H_kv, P + M, d] ×2"""
        if start != self.length:
            raise ValueError(f"the positions after a prefix of {self.length} start there, not at {start}")
        rows = k.shape[0]
        keys = torch.cat([self.k[layer].expand(rows, -1, -1, -1), k], dim=2)
        values = torch.cat([self.v[layer].expand(rows, -1, -1, -1), v], dim=2)
        return keys, values

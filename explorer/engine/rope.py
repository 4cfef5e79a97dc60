"""Rotary position embeddings, in one place.

Pairing: rotate-half, exactly as Hugging Face Llama. A head vector of size d is split into halves
x = [x₁ | x₂]; frequency pair i rotates the two coordinates (x₁[i], x₂[i]) by the angle m·θ_i, where m
is the token position and θ_i = inverse_frequencies(...)[i]. (The original RoFormer paper pairs
neighbours (x[2i], x[2i+1]) instead; checkpoints in HF layout assume rotate-half.)

All angles are float32, computed as HF computes them, so rotations agree to the last bit.
"""

from __future__ import annotations

import math

import torch

from explorer.engine.config import ModelConfig, RopeScaling


def inverse_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = None):
    """θ_i = theta^(−2i/d) for i in [0, d/2), rescaled per `scaling`, on the CPU whatever the default
    device (a model built on the meta device still gets real θ).  # [d/2] float32"""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float() / head_dim
    inv_freq = 1.0 / (theta**exponents)
    scaling = scaling or RopeScaling()
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    if scaling.rope_type == "llama3":
        return _llama3_rescale(inv_freq, scaling)
    return inv_freq


def _llama3_rescale(inv_freq: torch.Tensor, s: RopeScaling) -> torch.Tensor:
    """Llama 3.1+: long wavelengths slowed by `factor`, short ones kept, the band between blended."""
    wavelength = 2 * math.pi / inv_freq
    low_freq_wavelength = s.original_max_position_embeddings / s.low_freq_factor
    high_freq_wavelength = s.original_max_position_embeddings / s.high_freq_factor
    scaled = torch.where(wavelength > low_freq_wavelength, inv_freq / s.factor, inv_freq)
    smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    blended = (1 - smooth) * scaled / s.factor + smooth * scaled
    in_band = ~(wavelength < high_freq_wavelength) & ~(wavelength > low_freq_wavelength)
    return torch.where(in_band, blended, scaled)


def config_inverse_frequencies(config: ModelConfig) -> torch.Tensor:
    """The θ_i of a model, divided by its per-pair factors if it has them (llama.cpp's `rope_freqs`,
    which GGUF files of Llama 3.1+ carry in place of llama3 scaling parameters).  # [d/2] float32"""
    inv_freq = inverse_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
    if config.rope_freq_factors is not None:
        return inv_freq / torch.tensor(config.rope_freq_factors, dtype=torch.float32, device="cpu")
    return inv_freq


def sliding_inverse_frequencies(config: ModelConfig) -> torch.Tensor | None:
    """The θ_i of a model's sliding layers where they have their own base (Gemma 3: 10,000 against the
    full layers' 1,000,000), else None.  # [d/2] float32"""
    if config.sliding_rope_theta is None or config.layer_types is None:
        return None
    return inverse_frequencies(config.head_dim, config.sliding_rope_theta, config.sliding_rope_scaling)


def angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """m·θ_i for every position m and frequency pair i.  # [N], [d/2] -> [N, d/2] float32"""
    return positions.float()[:, None] * inv_freq.float()[None, :]


def cos_sin(angle: torch.Tensor, dtype: torch.dtype = torch.float32):
    """cos and sin laid out for rotate-half.  # [N, d/2] -> ([N, d], [N, d])"""
    both_halves = torch.cat((angle, angle), dim=-1)
    return both_halves.cos().to(dtype), both_halves.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x₁ | x₂] -> [−x₂ | x₁] on the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each frequency pair of x by its angle.  # x [..., N, d], cos/sin [N, d] -> [..., N, d]"""
    return x * cos + rotate_half(x) * sin


def pairs(x: torch.Tensor) -> torch.Tensor:
    """Each frequency pair's two coordinates (x₁[i], x₂[i]), side by side.  # [..., d] -> [..., d/2, 2]"""
    half = x.shape[-1] // 2
    return torch.stack((x[..., :half], x[..., half:]), dim=-1)


def wavelengths(inv_freq: torch.Tensor) -> torch.Tensor:
    """Tokens per full turn of each frequency pair, 2π/θ_i.  # [d/2]"""
    return 2 * math.pi / inv_freq

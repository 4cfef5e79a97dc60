"""RoPE: rotate-half pairing as HF Llama; rotations keep norms; scores depend only on m − n."""

from __future__ import annotations

import math

import pytest
import torch

from explorer.engine import rope
from explorer.engine.config import RopeScaling


def rotate(x: torch.Tensor, position: int, inv_freq: torch.Tensor) -> torch.Tensor:
    cos, sin = rope.cos_sin(rope.angles(torch.tensor([position]), inv_freq))
    return rope.apply_rope(x[None], cos, sin)[0]


@pytest.mark.parametrize(
    "scaling",
    [
        RopeScaling(),
        RopeScaling("linear", factor=4.0),
        RopeScaling("llama3", factor=8.0, original_max_position_embeddings=32),
    ],
)
def test_rotation_preserves_norms(scaling):
    generator = torch.Generator().manual_seed(0)
    inv_freq = rope.inverse_frequencies(32, 10000.0, scaling)
    x = torch.randn(200, 32, generator=generator, dtype=torch.float64)
    cos, sin = rope.cos_sin(rope.angles(torch.arange(200), inv_freq), torch.float64)
    rotated = rope.apply_rope(x, cos, sin)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_score_depends_only_on_relative_position(seed):
    generator = torch.Generator().manual_seed(seed)
    inv_freq = rope.inverse_frequencies(16, 10000.0).double()
    q, k = torch.randn(2, 16, generator=generator, dtype=torch.float64)
    m, n = torch.randint(0, 500, (2,), generator=generator).tolist()
    shift = int(torch.randint(1, 300, (1,), generator=generator))
    score = rotate(q, m, inv_freq) @ rotate(k, n, inv_freq)
    shifted = rotate(q, m + shift, inv_freq) @ rotate(k, n + shift, inv_freq)
    scale = (q.norm() * k.norm()).item()  # angles are float32, as in HF: allow their rounding
    assert abs(score.item() - shifted.item()) <= 1e-4 * scale
    if abs(m - n) > 2:  # and position really matters
        assert abs(score.item() - (q @ k).item()) > 1e-2 * scale


def test_rotate_half_pairs_coordinate_i_with_i_plus_half():
    d = 8
    inv_freq = torch.zeros(d // 2)
    inv_freq[1] = 1.0  # only pair 1 turns, by 1 radian per position
    x = torch.arange(1.0, d + 1)
    rotated = rotate(x, 1, inv_freq)
    changed = (rotated != x).nonzero().flatten().tolist()
    assert changed == [1, 1 + d // 2]
    c, s = math.cos(1.0), math.sin(1.0)
    assert rotated[1].item() == pytest.approx((x[1] * c - x[5] * s).item(), rel=1e-6)
    assert rotated[5].item() == pytest.approx((x[5] * c + x[1] * s).item(), rel=1e-6)


def test_angles_are_position_times_frequency():
    inv_freq = rope.inverse_frequencies(64, 10000.0)
    assert inv_freq.dtype == torch.float32 and inv_freq.shape == (32,)
    assert inv_freq[0].item() == 1.0 and inv_freq[-1].item() == pytest.approx(10000 ** (-62 / 64))
    table = rope.angles(torch.arange(10), inv_freq)
    assert table.shape == (10, 32)
    assert torch.equal(table[7], 7 * inv_freq)
    torch.testing.assert_close(rope.wavelengths(inv_freq), 2 * math.pi / inv_freq)


def test_llama3_scaling_slows_only_long_wavelengths():
    base = rope.inverse_frequencies(64, 500000.0)
    scaled = rope.inverse_frequencies(
        64, 500000.0, RopeScaling("llama3", factor=8.0, original_max_position_embeddings=8192)
    )
    wavelength = rope.wavelengths(base)
    short, long = wavelength < 8192 / 4, wavelength > 8192 / 1
    assert torch.equal(scaled[short], base[short])
    torch.testing.assert_close(scaled[long], base[long] / 8)
    assert short.any() and long.any()

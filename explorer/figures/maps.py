"""Big N×N maps, small enough to send: how a map is encoded, and drawn as a heatmap whose hover names
query, key and value.

Maps go out as base64 typed arrays (numpy float32 / uint8, which plotly serialises as `bdata`, never
as nested lists): exact float32 while the map fits a byte budget, else one byte per cell, else pooled
into blocks of positions (to half as many cells), with a note saying so. Pooling runs in torch, on a
view of the numpy map (5 to 10 times numpy's speed on blocks of 2 to 6 positions); numpy comes in
and numpy goes out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from plotly.colors import get_colorscale, sample_colorscale

MAP_BUDGET_BYTES = 256 * 256 * 4  # one big map: exact float32 up to 256 tokens, 8-bit up to 512
PROBS_COLORSCALE = get_colorscale("Blues")
LOG_FLOOR = 1e-4  # the faintest probability a log colour scale tells from zero
SIGNED_COLORSCALE = get_colorscale("RdBu_r")
MASK_COLOURS = [[0, "#f3f4f6"], [1, "#e0f2fe"]]
MASKED_FILL = dict(
    fillcolor="#f3f4f6",
    fillpattern=dict(shape="/", fgcolor="#6b7280", bgcolor="#f3f4f6", size=7, solidity=0.25),
)


@dataclass(frozen=True)
class EncodedMap:
    """A [N, N] map ready to send: its values, 8-bit codes, or 8-bit codes of pooled blocks."""

    kind: Literal["probs", "signed"]
    z: np.ndarray  # [cells, cells] float32 values (exact) or uint8 codes
    block: int  # positions per cell along each axis (1: one cell per token)
    exact: bool  # z holds the values themselves
    limit: float  # probs: 1; signed: max |value|, the colour scale runs over ±limit

    @property
    def note(self) -> str:
        """What a person should know about the precision, or '' when exact."""
        if self.exact:
            return ""
        if self.block == 1:
            return "colours in 8 bits; exact values in hover up to 256 tokens"
        return f"pooled into {self.block}×{self.block} blocks, colours in 8 bits"


def encode_probs(probs: np.ndarray, budget_bytes: int = MAP_BUDGET_BYTES) -> EncodedMap:
    """Probabilities [N, N]: float32; else whole percents in uint8; else block maxima in percent."""
    if probs.size * 4 <= budget_bytes:
        return EncodedMap("probs", probs.astype(np.float32), block=1, exact=True, limit=1.0)
    block = block_for(probs.shape[0], budget_bytes)
    return probs_codes(pool(probs, block, "max"), block)


def probs_codes(pooled: np.ndarray, block: int) -> EncodedMap:
    """Block maxima of probabilities (`pool` with "max") as whole percents in uint8."""
    percent = np.rint(np.nan_to_num(pooled) * 100).astype(np.uint8)
    return EncodedMap("probs", percent, block=block, exact=False, limit=1.0)


def encode_signed(
    values: np.ndarray, limit: float | None = None, budget_bytes: int = MAP_BUDGET_BYTES
) -> EncodedMap:
    """Real values [N, N], −inf allowed: float32 (−inf as NaN, a gap); else codes 1..255 over ±limit
    in uint8 (−inf as 0); else each block's most extreme finite value, coded the same way.
    `limit` defaults to max |finite value|; the colour scale runs over ±limit, 0 at its centre."""
    finite = np.where(np.isfinite(values), values, np.nan).astype(np.float32)
    if limit is None:
        limit = signed_limit(finite)
    limit = max(limit, 1e-12)
    if values.size * 4 <= budget_bytes:
        return EncodedMap("signed", finite, block=1, exact=True, limit=limit)
    block = block_for(values.shape[0], budget_bytes)
    return signed_codes(pool(finite, block, "extreme"), block, limit)


def signed_limit(values: np.ndarray) -> float:
    """max |finite value| (NaN for −∞ or a pooled gap), 1 when there is none: the colour scale's reach."""
    return float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0


def signed_codes(pooled: np.ndarray, block: int, limit: float) -> EncodedMap:
    """Values (NaN for a gap) as codes 1..255 over ±limit in uint8, 0 for a gap."""
    limit = max(limit, 1e-12)
    codes = np.nan_to_num(np.rint(128 + 127 * np.clip(pooled / limit, -1, 1)), nan=0).astype(np.uint8)
    return EncodedMap("signed", codes, block=block, exact=False, limit=limit)


def encode_mask(mask: np.ndarray, budget_bytes: int = MAP_BUDGET_BYTES // 4) -> tuple[np.ndarray, int]:
    """The causal mask [N, N] bool as uint8 (1: may attend), and its block size. A quarter of a map's
    budget: beyond 256 tokens it is pooled, while the hatched region still draws its exact edge."""
    block = block_for(mask.shape[0], budget_bytes)
    return np.nan_to_num(pool(mask.astype(np.float32), block, "max")).astype(np.uint8), block


def causal_mask_codes(n_tokens: int, budget_bytes: int = MAP_BUDGET_BYTES // 4) -> tuple[np.ndarray, int]:
    """`encode_mask` of the causal mask of `n_tokens`, without the [N, N] mask: a block of queries
    I and keys J may attend when its first key comes at or before its last query."""
    block = block_for(n_tokens, budget_bytes)
    cells = np.arange(math.ceil(n_tokens / block))
    last_query = np.minimum((cells + 1) * block - 1, n_tokens - 1)
    return (cells[None, :] * block <= last_query[:, None]).astype(np.uint8), block


def block_for(n_positions: int, budget_cells: int) -> int:
    """Positions per cell along each axis so that a map of `n_positions` fits `budget_cells` (8-bit
    cells). A map that must be pooled at all gets half the cells an unpooled 8-bit one may have: its
    cells are already smaller than a screen pixel on a panel (the zoom window shows exact values), and
    the update stays small (a 2,048-token pipeline view: 0.5 MB, not 1.4)."""
    if n_positions**2 > budget_cells:
        budget_cells //= 2
    block = 1
    while math.ceil(n_positions / block) ** 2 > budget_cells:
        block += 1
    return block


def pool(values: np.ndarray | torch.Tensor, block: int, reduce: Literal["max", "extreme"]) -> np.ndarray:
    """[..., R, C] -> [..., ceil(R/b), ceil(C/b)] float32: each b×b block's largest value ("max"), or
    its value of largest magnitude, sign kept ("extreme": a block mean would fade a map of mixed signs
    to grey; of two of equal magnitude, the positive one), over its finite values; NaN and −∞ are
    gaps, and a block of gaps alone pools to NaN. Rows pooled a block of queries at a time line up
    with the whole map's when each block of rows starts at a multiple of b."""
    x = torch.as_tensor(values, dtype=torch.float32)
    if block == 1:
        return x.numpy()
    if reduce == "max":
        high = _largest(x, block)
        return high.masked_fill(high == -math.inf, math.nan).numpy()
    return most_extreme(*pool_bounds(x, block)).numpy()


def _largest(x: torch.Tensor, block: int) -> torch.Tensor:
    """Each b×b block's largest value, gaps left out (−∞ for a block of gaps alone)."""
    high = _pool_reduce(x, block, torch.amax, -math.inf)  # −∞ never wins a max; NaN does
    if high.isnan().any():
        high = _pool_reduce(x.masked_fill(x.isnan(), -math.inf), block, torch.amax, -math.inf)
    return high


def pool_bounds(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each b×b block's largest and smallest finite value (−∞ and ∞ for a block of gaps alone), as
    `pool` finds them.  # [..., R, C] -> ([..., ceil(R/b), ceil(C/b)],) × 2"""
    high = _largest(x, block)
    low = _pool_reduce(x, block, torch.amin, math.inf)
    if not low.isfinite().all():  # gaps won a min: leave them out (checked pooled, redone if so)
        low = _pool_reduce(x.masked_fill(~x.isfinite(), math.inf), block, torch.amin, math.inf)
    return high, low


def most_extreme(high: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
    """The value of largest magnitude of each block from its bounds, sign kept (the positive one of
    two of equal magnitude); NaN for a block of gaps alone."""
    return torch.where(-low > high, low, high).masked_fill(high == -math.inf, math.nan)


def _pool_reduce(x: torch.Tensor, block: int, reduce, pad: float) -> torch.Tensor:
    """`reduce` (torch.amax or torch.amin) over each b×b block of the last two dims, padded with
    `pad` where the last blocks reach past them: along the rows of each row first (contiguous),
    then down the columns.  # [..., R, C] -> [..., ceil(R/b), ceil(C/b)]"""
    *lead, rows, cols = x.shape
    row_cells, col_cells = math.ceil(rows / block), math.ceil(cols / block)
    if (rows, cols) != (row_cells * block, col_cells * block):
        x = F.pad(x, (0, col_cells * block - cols, 0, row_cells * block - rows), value=pad)
    across = reduce(x.reshape(*lead, row_cells * block, col_cells, block), dim=-1)
    return reduce(across.reshape(*lead, row_cells, block, col_cells), dim=-2)


def map_heatmap(
    m: EncodedMap,
    value_name: str,
    axes: tuple[str, str],
    colorbar: dict | None = None,
    origin: tuple[int, int] = (0, 0),
    log_colours: bool = False,
) -> dict:
    """A heatmap trace of an encoded map over token positions; hover names query, key and value.
    `origin` is the (query, key) position of its first cell, for a window cut from a bigger map.
    `log_colours` colours probabilities on a log scale; the values (and so the hover) stay as they are."""
    if m.block == 1:
        where = "query %{y:d} “%{y}”<br>key %{x:d} “%{x}”"
    else:
        where = f"{m.block}×{m.block} block around<br>query %{{y:d}} “%{{y}}”, key %{{x:d}} “%{{x}}”"
    if m.exact:
        value = f"{value_name} = %{{z:.4g}}"
    elif m.kind == "probs":
        value = f"{'max ' if m.block > 1 else ''}{value_name} ≈ %{{z}}%"
    else:
        value = f"{value_name}: 8-bit colour (see scale)"
    return dict(
        type="heatmap",
        z=m.z,
        **_cells(m.block, origin),
        xaxis=axes[0],
        yaxis=axes[1],
        hoverongaps=False,
        hovertemplate=f"{where}<br>{value}<extra></extra>",
        **_colour(m, colorbar, log_colours),
    )


def mask_heatmap(codes: np.ndarray, block: int, axes: tuple[str, str]) -> dict:
    """The causal mask as `encode_mask` coded it: 1 where the query may attend."""
    return dict(
        type="heatmap",
        z=codes,
        **_cells(block),
        xaxis=axes[0],
        yaxis=axes[1],
        zmin=0,
        zmax=1,
        colorscale=MASK_COLOURS,
        showscale=False,
        hovertemplate="query %{y:d} “%{y}”<br>key %{x:d} “%{x}”<br>may attend: %{z} (0: score set to −∞)"
        "<extra></extra>",
    )


def _cells(block: int, origin: tuple[int, int] = (0, 0)) -> dict:
    """Heatmap geometry placing each cell over the `block` positions it covers on both axes."""
    centre = (block - 1) / 2
    return dict(x0=origin[1] + centre, dx=block, y0=origin[0] + centre, dy=block)


def log_colorscale(floor: float, steps: int = 16) -> list[list]:
    """PROBS_COLORSCALE spread over decades: stops at floor^(1 − k/steps), so each decade from `floor`
    (a fraction of the range) to 1 gets an equal share of the colours; below `floor`, the lightest."""
    colours = sample_colorscale(PROBS_COLORSCALE, [k / steps for k in range(steps + 1)])
    stops = [[0.0, colours[0]]]
    stops += [[float(floor ** (1 - k / steps)), colour] for k, colour in enumerate(colours)]
    return stops


def _colour(m: EncodedMap, colorbar: dict | None, log_colours: bool = False) -> dict:
    bar = {"thickness": 10, "outlinewidth": 0, **(colorbar or {})}
    shown = colorbar is not None
    if m.kind == "probs":
        if not m.exact:
            bar["ticksuffix"] = "%"
        if log_colours:
            bar["title"] = dict(text="log colours", side="top")
        # Exact maps resolve 1e-4; 8-bit ones hold whole percents, so their scale starts at 1%.
        floor = LOG_FLOOR if m.exact else 0.01
        return dict(
            colorscale=log_colorscale(floor) if log_colours else PROBS_COLORSCALE,
            zmin=0.0,
            zmax=1.0 if m.exact else 100.0,
            colorbar=bar,
            showscale=shown,
        )
    if m.exact:
        return dict(colorscale=SIGNED_COLORSCALE, zmin=-m.limit, zmax=m.limit, colorbar=bar, showscale=shown)
    ticks = np.linspace(-m.limit, m.limit, 5)
    bar.update(
        tickmode="array",
        tickvals=[128 + 127 * t / m.limit for t in ticks],
        ticktext=[f"{t:.3g}" for t in ticks],
    )
    return dict(colorscale=SIGNED_COLORSCALE, zmin=1, zmax=255, colorbar=bar, showscale=shown)


def masked_region(n_tokens: int, hover: str, axes: tuple[str, str]) -> dict:
    """The strict upper triangle (key after query) as one hatched polygon: a staircase of 2N points."""
    steps = np.arange(n_tokens - 2, -1, -1, dtype=np.float32)  # rows N−2 .. 0
    xs = np.concatenate([[0.5, n_tokens - 0.5, n_tokens - 0.5], np.repeat(steps + 0.5, 2)])
    ys = np.concatenate([[-0.5, -0.5, n_tokens - 1.5], np.stack([steps + 0.5, steps - 0.5], 1).ravel()])
    return dict(
        type="scatter",
        x=xs.astype(np.float32),
        y=ys.astype(np.float32),
        xaxis=axes[0],
        yaxis=axes[1],
        fill="toself",
        mode="lines",
        line=dict(width=0),
        hoveron="fills",
        hoverinfo="text",
        text=hover,
        showlegend=False,
        **MASKED_FILL,
    )

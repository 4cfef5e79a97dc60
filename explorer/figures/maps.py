"""Encoded maps drawn as heatmaps (`figures.codec` encodes them): cells placed over the positions they
cover, hover naming query, key and value, colour scales for probabilities (linear or log) and for signed
values, the causal mask, and the hatched region where keys come after their query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from plotly.colors import get_colorscale, sample_colorscale

from explorer.figures import codec
from explorer.figures.codec import EncodedMap

PROBS_COLORSCALE = get_colorscale("Blues")
LOG_FLOOR = 1e-4  # the faintest probability a log colour scale tells from zero
SIGNED_COLORSCALE = get_colorscale("RdBu_r")
MASK_COLOURS = [[0, "#f3f4f6"], [1, "#e0f2fe"]]
MASKED_FILL = dict(
    fillcolor="#f3f4f6",
    fillpattern=dict(shape="/", fgcolor="#6b7280", bgcolor="#f3f4f6", size=7, solidity=0.25),
)


@dataclass(frozen=True)
class MapStyle:
    """How softmax maps are drawn: `log` colours them on a log scale (values and hover unchanged);
    `weighted` draws, in place of each weight α, its share of what the query reads by what each key
    writes: ‖α_ij·v_j·W_O‖ over its row's sum (Kobayashi et al. 2020), so rows sum to 1 as α's do."""

    log: bool = False
    weighted: bool = False


@dataclass(frozen=True)
class KeyWrites:
    """What a weighted map's hover shows beside each cell's share (exact maps alone): its attention
    weight α and ‖α·v·W_O‖, from the map's α, each key's ‖v·W_O‖ and each row's Σ ‖α·v·W_O‖. The page
    rebuilds them from the share and the two vectors (`meta.weighted`), so they are not sent."""

    probs: np.ndarray  # [R, K] α
    value_norms: np.ndarray  # [K] ‖v_j·W_O‖
    row_sums: np.ndarray  # [R] Σ_j ‖α_ij·v_j·W_O‖

    def trace(self) -> dict:
        """The heatmap's customdata [R, K, 2] (α, ‖α·v·W_O‖), float32, and the rule to rebuild it."""
        probs = np.asarray(self.probs, dtype=np.float32)
        norms = np.asarray(self.value_norms, dtype=np.float32)
        sums = np.asarray(self.row_sums, dtype=np.float32)
        written = probs * norms[None, :]  # float32 products, as AttentionInternals.weighted_norms
        return dict(customdata=np.stack([probs, written], axis=-1), meta=codec.weighted_rule(sums, norms))


DATA_RANGE_FROM = 128  # positions: past this, a linear probability scale tops out where the rows peak


def colour_top(maps: list[EncodedMap]) -> float:
    """Where a linear probability scale tops out: 1 for a short prompt; past DATA_RANGE_FROM positions,
    the median of the maps' row maxima (every row of every map together), rounded up to 1, 2 or 5 × a
    power of ten. A long prompt's rows spread thin (at 384 tokens half of an early layer's rows peak
    under 0.05) and a 0–1 scale leaves them white; cells past the top take its colour, and hover gives
    every value as it is."""
    if not maps or maps[0].z.shape[0] * maps[0].block < DATA_RANGE_FROM:
        return 1.0
    scale = 1.0 if maps[0].exact else 100.0  # 8-bit maps hold whole percents
    peaks = np.concatenate([np.nanmax(m.z, axis=1).astype(np.float32) / scale for m in maps])
    typical = float(np.nanmedian(peaks))
    for top in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
        if typical <= top:
            return top
    return 1.0


KEY_WRITES_HOVER = "α = %{customdata[0]:.4g} · ‖α·v·W_O‖ = %{customdata[1]:.4g}"


def map_heatmap(
    m: EncodedMap,
    value_name: str,
    axes: tuple[str, str],
    colorbar: dict | None = None,
    origin: tuple[int, int] = (0, 0),
    log_colours: bool = False,
    key_writes: KeyWrites | None = None,
    top: float = 1.0,
) -> dict:
    """A heatmap trace of an encoded map over token positions; hover names query, key and value.
    `origin` is the (query, key) position of its first cell, for a window cut from a bigger map.
    `log_colours` colours probabilities on a log scale; the values (and so the hover) stay as they are,
    and the colour bar is `log_colour_bar`'s. `key_writes`: a weighted map's α and ‖α·v·W_O‖ in hover,
    where the map is exact. `top`: where a linear probability scale tops out (`colour_top`)."""
    if m.block == 1:
        where = "query %{y:d} “%{y}”<br>key %{x:d} “%{x}”"
    else:
        where = f"{m.block}×{m.block} block around<br>query %{{y:d}} “%{{y}}”, key %{{x:d}} “%{{x}}”"
    extra = {}
    if m.exact:
        value = f"{value_name} = %{{z:.4g}}"
        if key_writes is not None:
            value += "<br>" + KEY_WRITES_HOVER
            extra = key_writes.trace()
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
        **_colour(m, colorbar, log_colours, top),
        **extra,
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


def log_floor(m: EncodedMap) -> float:
    """The faintest probability a log colour scale tells from zero, as a fraction of the scale's top:
    exact maps resolve 1e-4; 8-bit ones hold whole percents, so their scale starts at 1%."""
    return LOG_FLOOR if m.exact else 0.01


# A map's colour bar. Its labels all fit: Plotly need not measure each one to hide those past the
# plot's edge (its default, "hide past div", reads every label's box as the bar is drawn).
MAP_BAR = {"thickness": 10, "outlinewidth": 0, "ticklabeloverflow": "allow"}


def log_colour_bar(m: EncodedMap, colorbar: dict, axes: tuple[str, str]) -> dict:
    """The colour bar of a probability map on log colours, carried by an empty trace: its colours run
    evenly over the decades from `log_floor` to the top, a tick at each (1e-4 … 1, or 1% … 100%). The
    map's own bar is linear in p, where the decades would crowd at 0; the map keeps its values, so
    hover stays exact. A vertical bar is titled "log colours"; a horizontal one (Plotly misplaces the
    title of a bar placed on the figure, `common.colorbar_at_foot`) leaves it to its panel's title."""
    low = math.log10(log_floor(m))
    decades = list(range(round(low), 1))  # log10 of each tick, −4 … 0
    if m.exact:
        labels = [f"{10.0**d:g}" if d >= -2 else f"1e{d}" for d in decades]
    else:
        labels = [f"{100 * 10.0**d:g}%" for d in decades]
    labels[0] = "≤" + labels[0]  # fainter cells take the floor's colour
    bar = {**MAP_BAR, **colorbar, "tickmode": "array", "tickvals": decades}
    bar["ticktext"] = labels
    if colorbar.get("orientation", "v") == "v":
        bar["title"] = dict(text="log colours", side="right")
    return dict(
        type="scatter",
        x=[None],
        y=[None],
        xaxis=axes[0],
        yaxis=axes[1],
        mode="markers",
        marker=dict(
            color=[low], cmin=low, cmax=0.0, colorscale=PROBS_COLORSCALE, showscale=True, colorbar=bar
        ),
        hoverinfo="skip",
        showlegend=False,
    )


def _colour(m: EncodedMap, colorbar: dict | None, log_colours: bool = False, top: float = 1.0) -> dict:
    bar = {**MAP_BAR, **(colorbar or {})}
    shown = colorbar is not None
    if m.kind == "probs":
        scale = 1.0 if m.exact else 100.0  # 8-bit maps hold whole percents
        if not m.exact:
            bar["ticksuffix"] = "%"
        if top < 1 and not log_colours:  # the bar says where its colours stop: "≥ 0.05" at the top
            ticks, unit = [0.0, top / 2, top], bar.get("ticksuffix", "")  # (tick text takes no suffix)
            bar.update(
                tickmode="array",
                tickvals=[v * scale for v in ticks],
                ticktext=[f"{v * scale:g}{unit}" for v in ticks[:2]] + [f"≥ {top * scale:g}{unit}"],
            )
        return dict(
            colorscale=log_colorscale(log_floor(m)) if log_colours else PROBS_COLORSCALE,
            zmin=0.0,
            zmax=(1.0 if log_colours else top) * scale,
            colorbar=bar,
            showscale=shown and not log_colours,  # log colours: `log_colour_bar` shows the scale
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
    return _hatched(xs, ys, hover, axes)


def outside_window_region(n_tokens: int, window: int, hover: str, axes: tuple[str, str]) -> dict | None:
    """The cells a sliding window hides below the diagonal (key `window` or more before its query), as
    one hatched polygon: a staircase down the left of rows window..N−1 (None: the window holds all)."""
    if n_tokens <= window:
        return None
    rows = np.arange(window, n_tokens, dtype=np.float32)  # each hides keys 0 .. row − window
    right = rows - window + 0.5
    xs = np.concatenate([[-0.5], np.repeat(right, 2), [-0.5]])
    ys = np.concatenate([[window - 0.5], np.stack([rows - 0.5, rows + 0.5], 1).ravel(), [n_tokens - 0.5]])
    return _hatched(xs, ys, hover, axes)


WINDOW_EDGE = dict(color="#ea580c", width=1.2, dash="dash")


def window_edge(n_tokens: int, window: int, axes: tuple[str, str]) -> dict | None:
    """A sliding window's lower edge across a map, where the weights stop: between key i − window and
    key i − window + 1 of each query i (the model attends i − window < j ≤ i). A straight dashed line, so
    it stays visible over maps of weights (which fade near it) and pooled cells (where the staircase
    of the mask is a blur). It takes no hover, which stays with the cells it runs between (the hatched
    region says what lies left of it). None: the window holds every key."""
    if n_tokens <= window:
        return None
    return dict(
        type="scatter",
        x=[-0.5, float(n_tokens - window)],  # x = y − window + 0.5; two points, sent as a list
        y=[window - 1.0, n_tokens - 0.5],
        xaxis=axes[0],
        yaxis=axes[1],
        mode="lines",
        line=WINDOW_EDGE,
        hoverinfo="skip",
        showlegend=False,
    )


def _hatched(xs: np.ndarray, ys: np.ndarray, hover: str, axes: tuple[str, str]) -> dict:
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

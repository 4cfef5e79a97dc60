"""The attention maps of one layer: one head stage by stage, and every head side by side."""

from __future__ import annotations

import dataclasses
import inspect
from typing import NamedTuple

import numpy as np

from explorer.figures import codec
from explorer.figures.codec import (
    ALL_HEADS_BUDGET_BYTES,
    MAP_BUDGET_BYTES,
    EncodedMap,
    encode_mask,
    encode_probs,
    encode_signed,
)
from explorer.figures.common import (
    MAX_TICK_LABELS,
    axis_title,
    colorbar_at_foot,
    figure,
    grid,
    group_colour,
)
from explorer.figures.maps import (
    KeyWrites,
    MapStyle,
    colour_top,
    log_colour_bar,
    map_heatmap,
    mask_heatmap,
    masked_region,
    outside_window_region,
    window_edge,
)
from explorer.figures.plot import Plot, builds_figure
from explorer.figures.thumbnails import FRAME_GAP_PX, FRAME_WIDTH, end_keys, thumbnail_frame

MASKED_HOVER = "−∞: the key comes after the query"
OUTSIDE_WINDOW_HOVER = "−∞: the key is outside this sliding layer's window of {window} tokens"


class PipelineParts(NamedTuple):
    """A head's pipeline before it is a figure: its traces, its layout (every head's of a layer alike)
    and its title (the only part of the layout that tells heads apart)."""

    data: list[dict]
    layout: dict
    title: str
    tokens: list[str]

    def plot(self) -> Plot:
        return figure(
            self.data,
            self.tokens,
            title=self.title,
            height=480,
            margin=dict(l=70, r=20, t=80, b=40),
            **self.layout,
        )


@builds_figure
def pipeline_figure(*args, **kwargs) -> Plot:
    """One head's stages side by side (`pipeline_parts`, which takes the same arguments), as a figure."""
    return pipeline_parts(*args, **kwargs).plot()


def pipeline_parts(
    tokens: list[str],
    scores: np.ndarray | EncodedMap,  # [N, N] Q·Kᵀ after RoPE
    scaled: np.ndarray | EncodedMap,  # [N, N] scores · scale
    mask: np.ndarray | tuple[np.ndarray, int],  # [N, N] bool, True where the query may attend
    masked: np.ndarray | EncodedMap,  # [N, N] scaled, −inf where masked
    probs: np.ndarray | EncodedMap,  # [N, N] softmax of masked (`style.weighted`: each key's share)
    scale: float,
    title: str,
    style: MapStyle = MapStyle(),
    key_writes: KeyWrites | None = None,
    qk_norms: dict[str, np.ndarray] | None = None,  # q, q_normed, k, k_normed: [N] norms, with QK-norm
    window: int | None = None,  # a sliding layer's window: the mask is a band, not the causal triangle
    scale_name: str = "1/√d",  # what the scores are scaled by (Gemma: 1/√query_pre_attn_scalar)
    exact: bool = True,
) -> PipelineParts:
    """Q·Kᵀ → scaled → causal mask → masked → softmax, side by side on shared token axes, the softmax
    drawn in `style` (on a log colour scale; weighted by what each key writes: then `probs` holds the
    shares, and `key_writes` what hover shows beside them). Each map comes as values, or already pooled
    and coded (a long prompt's, computed a block of queries at a time: EncodedMaps, and the mask as
    `encode_mask`'s codes and block). `exact=False` codes values in 8 bits even where float32 would
    fit (a layer whose every head's pipeline goes to the page at once: `views.pipeline_exact`)."""
    n = len(tokens)
    mask_title = "causal mask" if window is None else f"window of {window}"
    titles = ["Q·Kᵀ", f"scaled × {scale_name} = {scale:.4g}", mask_title, "masked (−∞ hatched)"]
    titles.append(softmax_title(style))
    if qk_norms is not None:
        titles.append(QK_NORM_TITLE)
    layout, (raw, scaled_at, mask_at, masked_at, probs_at, *qk_at) = grid(
        len(titles), cols=len(titles), titles=titles
    )
    if isinstance(scores, EncodedMap):  # pooled: the scaled codes are the raw ones, as in scaled_maps
        scores_map, masked_map, mask_codes = scores, masked, mask
        scaled_map = dataclasses.replace(scores_map, limit=scaled.limit)
    else:
        scores_map, mask_codes = encode_signed(scores, exact=exact), encode_mask(mask)
        scaled_map, masked_map = scaled_maps(scores_map, scaled, masked, mask)
    probs_map = probs if isinstance(probs, EncodedMap) else encode_probs(probs, exact=exact)
    data = [
        map_heatmap(scores_map, "q·k", raw, colorbar_at_foot(layout, raw[0])),
        map_heatmap(scaled_map, "scaled", scaled_at, colorbar_at_foot(layout, scaled_at[0])),
        mask_heatmap(*mask_codes, mask_at),
        map_heatmap(masked_map, "masked", masked_at, colorbar_at_foot(layout, masked_at[0])),
        map_heatmap(
            probs_map,
            softmax_value(style),
            probs_at,
            colorbar_at_foot(layout, probs_at[0]),
            log_colours=style.log,
            key_writes=key_writes,
            top=colour_top([probs_map]),
        ),
    ]
    # What a browser rebuilds from another panel, bit for bit (see figures.common.to_json(compact=True)
    # and the page's script); the figure itself keeps every value.
    if scores_map.exact:  # scaled = float32(scores × float32(scale)), as torch multiplies
        data[1]["meta"] = codec.scaled_rule(0, scale)
    else:  # 8-bit codes relative to each panel's own limit: the same codes
        data[1]["meta"] = codec.same_rule(0)
    if masked_map.block == 1 and (window is None or window >= n):  # masked = scaled where j ≤ i, else −∞
        data[3]["meta"] = codec.causal_rule(1, None if masked_map.exact else 0)
    for trace in (data[2], data[4]):  # the mask and the softmax, unpooled: nothing above the diagonal
        fill = codec.lower_triangle_fill(trace["z"])
        if fill is not None:
            trace["meta"] = trace.get("meta", {}) | codec.packed_rule(fill)
    if n > 1:
        data += [masked_region(n, MASKED_HOVER, at) for at in (mask_at, masked_at)]
    if window is not None and n > window:
        hover = OUTSIDE_WINDOW_HOVER.format(window=window)
        data += [outside_window_region(n, window, hover, at) for at in (mask_at, masked_at)]
        data.append(window_edge(n, window, probs_at))  # the softmax is 0 beyond it, however it is coloured
    if style.log:
        data.append(log_colour_bar(probs_map, colorbar_at_foot(layout, probs_at[0]), probs_at))
    if qk_norms is not None:  # last, so the maps' traces and axes are those of every other model
        data += qk_norm_traces(qk_norms, qk_at[0])
        x, y = qk_at[0]
        own = {k: v for k, v in layout[f"xaxis{x[1:]}"].items() if k != "matches"}  # norms, not keys
        layout[f"xaxis{x[1:]}"] = own | dict(  # numbers, not the token axis the template gives every axis
            title=axis_title("‖·‖ per position"),
            tickmode="auto",
            nticks=4,
            labelalias={},
            tickformat=".2~f",
            rangemode="tozero",
            automargin=True,
        )
        layout[f"yaxis{y[1:]}"].update(range=[n - 0.5, -0.5], showticklabels=False)
    for i, (x, y) in enumerate((raw, scaled_at, mask_at, masked_at, probs_at)):
        layout[f"xaxis{x[1:]}"].update(
            range=[-0.5, n - 0.5], tickangle=-90, title=axis_title("key"), automargin=True
        )
        layout[f"yaxis{y[1:]}"].update(
            range=[n - 0.5, -0.5], showticklabels=i == 0, title=dict(text="query") if i == 0 else None
        )
    note = scores_map.note
    return PipelineParts(data, layout, title + (f"<br><sup>{note}</sup>" if note else ""), tokens)


# help() and editors show pipeline_figure's arguments: pipeline_parts'
pipeline_figure.plot.__signature__ = inspect.signature(pipeline_parts).replace(return_annotation="Plot")
pipeline_figure.__signature__ = pipeline_figure.plot.__signature__.replace(return_annotation="go.Figure")


QK_NORM_TITLE = (
    "QK-norm: <span style='color:#1d4ed8'>‖q‖</span> <span style='color:#c2410c'>‖k‖</span><br>dotted: before"
)
QK_NORM_LINES = (  # norm, name, colour, dash
    ("q", "‖q‖ projected", "#93c5fd", "dot"),
    ("q_normed", "‖q‖ after QK-norm", "#1d4ed8", "solid"),
    ("k", "‖k‖ projected", "#fdba74", "dot"),
    ("k_normed", "‖k‖ after QK-norm", "#c2410c", "solid"),
)


def qk_norm_traces(norms: dict[str, np.ndarray], axes: tuple[str, str]) -> list[dict]:
    """Each query's and key's norm before and after QK-norm, down the positions (the maps' rows): the
    norm evens them out, so no query or key wins a dot product by its length alone.  # each [N]"""
    return [
        dict(
            type="scatter",
            mode="lines",
            x=norms[name].astype(np.float32),
            y=np.arange(len(norms[name]), dtype=np.int32),
            xaxis=axes[0],
            yaxis=axes[1],
            name=label,
            line=dict(color=colour, dash=dash, width=1.5),
            hovertemplate=f"position %{{y}}: {label} = %{{x:.4g}}<extra></extra>",
            showlegend=False,  # the panel's title names the lines
        )
        for name, label, colour, dash in QK_NORM_LINES
    ]


def softmax_title(style: MapStyle) -> str:
    name = "α weighted by ‖v·W_O‖" if style.weighted else "softmax"
    return name + (" · log colours" if style.log else "")


def softmax_value(style: MapStyle) -> str:
    """What hover calls a softmax map's value: p, or a weighted map's share of its row."""
    return "share" if style.weighted else "p"


def scaled_maps(scores_map: EncodedMap, scaled: np.ndarray, masked: np.ndarray, mask: np.ndarray):
    """The scaled and masked panels' maps. Exact: float32 values. Coded in 8 bits: scaled × 1/√d is
    the raw map × a constant, so its codes are the raw map's (each panel's colour bar runs over its
    own limit), and unpooled, the masked codes are those where the mask allows (0, −∞, elsewhere)."""
    scaled_map = encode_signed(scaled, exact=scores_map.exact)
    if scores_map.exact:
        return scaled_map, encode_signed(masked, limit=scaled_map.limit)
    scaled_map = dataclasses.replace(scores_map, limit=scaled_map.limit)
    if scaled_map.block > 1:
        return scaled_map, encode_signed(masked, limit=scaled_map.limit)
    codes = np.where(mask, scaled_map.z, 0).astype(np.uint8)
    return scaled_map, dataclasses.replace(scaled_map, z=codes)


THUMBNAIL_HEIGHT = 204  # px a row of thumbnails, its title and its first and last keys included
ROW_GAP_PX = 46  # between rows of thumbnails: a frame's gap and line, its keys, the next row's titles


def group_columns(n_heads: int, group_size: int, most: int = 8) -> int:
    """Columns for the small multiples: whole kv groups per row while a row holds at most `most`."""
    if group_size >= most:
        return most
    return min(n_heads, group_size * (most // group_size))


@builds_figure
def all_heads_figure(
    tokens: list[str],
    probs: np.ndarray | list[EncodedMap],  # [H, N, N] the layer's softmax maps, or each already coded
    kv_head: np.ndarray,  # [H] which kv head each query head reads
    title: str,
    style: MapStyle = MapStyle(),
    subtitle: str = "",
    key_writes: list[KeyWrites] | None = None,
    window: int | None = None,  # a sliding layer's window: its edge is drawn on every map
) -> Plot:
    """Every head's softmax map as small multiples, framed and coloured by the kv head they share, in
    `style` (`pipeline_figure`'s: weighted, `probs` are the shares and `key_writes` each head's hover);
    `subtitle` (e.g. the layer's faithfulness check) under the title, beside the maps' precision; a
    sliding layer's `window` as its edge on each map."""
    n_heads, n = len(probs), len(tokens)
    cols = group_columns(n_heads, n_heads // (int(kv_head.max()) + 1))
    rows = -(-n_heads // cols)
    height, margin = 80 + THUMBNAIL_HEIGHT * rows, dict(l=20, r=20, t=80, b=20)
    plot_height = height - margin["t"] - margin["b"]
    titles = [f"head {h} · kv {kv_head[h]}" for h in range(n_heads)]
    layout, cells = grid(n_heads, cols, h_gap=0.015, v_gap=ROW_GAP_PX / plot_height, titles=titles)
    maps = [
        p if isinstance(p, EncodedMap) else encode_probs(p, ALL_HEADS_BUDGET_BYTES // n_heads) for p in probs
    ]
    colorbar = dict(thickness=10, len=0.8)
    writes, value, top = key_writes or [None] * n_heads, softmax_value(style), colour_top(maps)
    data = [
        map_heatmap(m, value, at, colorbar if h == 0 else None, log_colours=style.log, key_writes=w, top=top)
        for h, (m, at, w) in enumerate(zip(maps, cells, writes, strict=True))
    ]
    if style.log:
        data.append(log_colour_bar(maps[0], colorbar, cells[0]))
    if window is not None and n > window:
        data += [window_edge(n, window, at) for at in cells]
    shapes, ends = [], []
    for h, (x, y) in enumerate(cells):
        colour = group_colour(int(kv_head[h]))
        layout["annotations"][h].update(font=dict(size=11, color=colour), yshift=FRAME_GAP_PX + FRAME_WIDTH)
        x_axis, y_axis = layout[f"xaxis{x[1:]}"], layout[f"yaxis{y[1:]}"]
        x_axis.update(range=[-0.5, n - 0.5], showticklabels=False, ticks="")
        y_axis.update(range=[n - 0.5, -0.5], showticklabels=h % cols == 0, ticks="")
        if h % cols == 0:  # the first and last queries, left of a row's first thumbnail
            y_axis.update(tickmode="array", tickvals=[0, n - 1], ticklabelstandoff=FRAME_GAP_PX + 4)
            y_axis.update(tickfont=dict(size=9), automargin=True)
        shapes.append(thumbnail_frame(x_axis["domain"], y_axis["domain"], colour, plot_height))
        ends += end_keys(tokens, x_axis["domain"], y_axis["domain"][0], plot_height)
    layout["annotations"] += ends
    note = " · ".join(part for part in (subtitle, maps[0].note) if part)
    return figure(
        data,
        tokens,
        title=title + (f"<br><sup>{note}</sup>" if note else ""),
        shapes=shapes,
        height=height,
        margin=margin,
        **layout,
    )


ZOOM_CELLS = MAP_BUDGET_BYTES // 4  # exact float32 values of at most this many cells


@builds_figure
def zoom_figure(
    tokens: list[str],
    masked: np.ndarray,  # [q, k] scaled scores of the window, −inf where masked
    probs: np.ndarray,  # [q, k] softmax values of the window (`style.weighted`: each key's share)
    origin: tuple[int, int],  # (first query, first key) position of the window
    title: str,
    style: MapStyle = MapStyle(),
    key_writes: KeyWrites | None = None,
) -> Plot:
    """A window of one head's maps at exact values, on the prompt's token axes: the masked scores and
    the softmax (in `style`, as `pipeline_figure` draws it) side by side, whatever the prompt's length
    (the full maps are pooled past 512)."""
    if masked.size > ZOOM_CELLS:
        raise ValueError(f"a zoom window holds at most {ZOOM_CELLS:,} cells, this one {masked.size:,}")
    layout, (scores_at, probs_at) = grid(
        2, cols=2, h_gap=0.08, titles=["masked scores (−∞ blank)", softmax_title(style)]
    )
    probs_map, probs_bar = encode_probs(probs), colorbar_at_foot(layout, probs_at[0])
    data = [
        map_heatmap(
            encode_signed(masked), "masked", scores_at, colorbar_at_foot(layout, scores_at[0]), origin
        ),
        map_heatmap(probs_map, softmax_value(style), probs_at, probs_bar, origin, style.log, key_writes),
    ]
    if style.log:
        data.append(log_colour_bar(probs_map, probs_bar, probs_at))
    (q0, k0), (nq, nk) = origin, masked.shape
    for i, (x, y) in enumerate((scores_at, probs_at)):
        layout[f"xaxis{x[1:]}"].update(
            range=[k0 - 0.5, k0 + nk - 0.5],
            tick0=k0,
            dtick=-(-nk // MAX_TICK_LABELS),
            tickangle=-90,
            title=axis_title("key"),
            automargin=True,
        )
        layout[f"yaxis{y[1:]}"].update(
            range=[q0 + nq - 0.5, q0 - 0.5],
            tick0=q0,
            dtick=-(-nq // MAX_TICK_LABELS),
            showticklabels=i == 0,
            title=dict(text="query") if i == 0 else None,
        )
    return figure(
        data,
        tokens,
        title=title,
        height=420 + 4 * min(nq, 60),
        margin=dict(l=70, r=20, t=80, b=40),
        **layout,
    )

"""What the model is about to say at every layer (the logit lens), a token's rank across layers, and
who writes a logit (direct logit attribution)."""

from __future__ import annotations

import html

import numpy as np
from plotly.colors import get_colorscale

from explorer.engine.tokens import printable
from explorer.figures.common import figure, grid, quoted_token, token_axis
from explorer.figures.plot import Plot, builds_figure

CELL_PX, CELL_CHARS = 44, 5  # a grid cell's width, and the characters of its token an export shows


def stream_names(n_layers: int) -> list[str]:
    """What each of the lens' L + 1 readings of the stream is, by the blocks the views number (head 23.4
    is in block 23): the embeddings, then the stream after each block, the last being the output."""
    names = ["the embeddings", *(f"after block {b}" for b in range(n_layers))]
    return [*names[:-1], f"{names[-1]}: the output"] if n_layers else names


def stream_ticks(n_layers: int) -> dict[str, str]:
    """The lens' readings as an axis labels them: "emb", then each block's number."""
    return {str(i): "emb" if i == 0 else str(i - 1) for i in range(n_layers + 1)}


@builds_figure
def lens_figure(
    tokens: list[str],
    positions: list[int],
    top_tokens: list[list[list[str]]],
    top_probs: np.ndarray,
    kl: np.ndarray,
) -> Plot:
    """Positions × readings of the stream (the embeddings, then after each block), each cell its top-1
    token, shaded by its probability; hover: the top-k and the KL to the output. The page shows as
    much of each cell's token as the cell holds (`meta.fit_text`: every token whole); an export, its
    first CELL_CHARS characters.  # top_tokens [L+1][P][k], top_probs [L+1, P, k], kl [L+1, P]"""
    n_layers = top_probs.shape[0] - 1
    whole = [[printable(row[0]) for row in layer] for layer in top_tokens]  # [L+1][P]
    names = stream_names(n_layers)
    hover = [
        [
            f"{name}<br>"
            + "<br>".join(f"{quoted_token(t)} {p:.3g}" for t, p in zip(row, probs, strict=True))
            + f"<br>KL to the output: {k:.3g} nats"
            for row, probs, k in zip(layer, layer_probs, layer_kl, strict=True)
        ]
        for name, layer, layer_probs, layer_kl in zip(names, top_tokens, top_probs, kl, strict=True)
    ]
    axis = token_axis([tokens[p] for p in positions])  # labelled by the window's own tokens
    axis["labelalias"] = dict(zip(map(str, positions), axis["labelalias"].values(), strict=True))
    axis["tick0"] = positions[0]
    heatmap = dict(
        type="heatmap",
        z=top_probs[..., 0].astype(np.float32),
        x=np.asarray(positions, dtype=np.int32),
        text=[[_cell_label(label) for label in row] for row in whole],
        texttemplate="%{text}",
        textfont=dict(size=10),
        customdata=hover,
        zmin=0.0,
        zmax=1.0,
        colorscale=get_colorscale("Blues"),
        colorbar=dict(title=dict(text="top-1 probability", side="right"), thickness=12),
        hovertemplate="position %{x:d} (%{x})<br>%{customdata}<extra></extra>",
        xgap=1,
        ygap=1,
        meta=dict(fit_text=whole),
    )
    first, last = positions[0], positions[-1]
    return figure(
        [heatmap],
        title=f"The logit lens: the top token after every block, positions {first}–{last}",
        xaxis=dict(axis, title=dict(text="position (the token read)")),
        yaxis=dict(
            tickmode="linear",
            tick0=0,
            dtick=1 if n_layers <= 32 else 2,
            labelalias=stream_ticks(n_layers),
            title=dict(text="after block (emb: the embeddings)"),
            showgrid=False,
            zeroline=False,
        ),
        height=max(320, 120 + 18 * (n_layers + 1)),
        meta=dict(min_width=130 + CELL_PX * len(positions)),  # the page lets its card scroll past it
        margin=dict(l=90, b=70),
    )


def _cell_label(label: str) -> str:
    """A cell's token as an export shows it: at most CELL_CHARS characters (hover gives it whole)."""
    return html.escape(label if len(label) <= CELL_CHARS else label[: CELL_CHARS - 1] + "…", quote=False)


def rank_ticks(largest: int) -> tuple[list[int], list[str]]:
    """A rank axis' ticks: every power of ten from 1 past `largest`, each written in full."""
    decades = [10**k for k in range(len(str(max(int(largest), 1))) + 1)]
    return decades, [f"{value:,}" for value in decades]


@builds_figure
def rank_figure(
    target: str, ranks: np.ndarray, probs: np.ndarray, position: tuple[int, str], chosen: bool = True
) -> Plot:
    """A token's rank (log scale, 1 at the top) and probability after every block at one position;
    `chosen`: typed by the person, else the model's own prediction.  # ranks [L+1] (1 = top), probs [L+1]"""
    n_layers = len(ranks) - 1
    layers = np.arange(n_layers + 1, dtype=np.int32)
    layout, cells = grid(
        2, cols=2, h_gap=0.12, titles=["rank (1: the top token)", "probability"], linked=False
    )
    names = stream_names(n_layers)
    lines = (
        (ranks.astype(np.int64), "#2563eb", "rank %{y:,}"),
        (probs.astype(np.float32), "#dc2626", "p = %{y:.4g}"),
    )
    data = [
        dict(
            type="scatter",
            mode="lines+markers",
            x=layers,
            y=values,
            xaxis=x,
            yaxis=y,
            line=dict(color=colour),
            customdata=names,
            hovertemplate=f"%{{customdata}}: {what}<extra></extra>",
        )
        for (values, colour, what), (x, y) in zip(lines, cells, strict=True)
    ]
    tickvals, ticktext = rank_ticks(int(ranks.max(initial=1)))
    layout[f"yaxis{cells[0][1][1:]}"].update(
        type="log",
        autorange="reversed",
        tickmode="array",
        tickvals=tickvals,
        ticktext=ticktext,
        title=dict(text="rank"),
    )
    layout[f"yaxis{cells[1][1][1:]}"].update(range=[0, 1.02], title=dict(text="probability"))
    ticks = stream_ticks(n_layers)
    for x, _ in cells:
        layout[f"xaxis{x[1:]}"].update(
            title=dict(text="after block (emb: the embeddings)"),
            tickmode="linear",
            tick0=0,
            dtick=max(1, n_layers // 10),
            labelalias=ticks,
        )
    index, token = position
    what = "typed" if chosen else "the model's prediction there"
    return figure(
        data,
        title=f"{quoted_token(target)} ({what}) after every block, read at position {index} "
        f"({quoted_token(token)})",
        showlegend=False,
        height=320,
        **layout,
    )


@builds_figure
def attribution_figure(
    heads: np.ndarray,
    mlps: np.ndarray,
    biases: np.ndarray,
    embedding: float,
    total: float,
    kv_head: np.ndarray,
    read: tuple[str, str | None, int],
) -> Plot:
    """Direct logit attribution of `read` (answer, distractor or None, position): layers × heads on a
    diverging scale centred at 0, beside bars for each layer's MLP (and o_proj bias, where there is one)
    and the embedding.  # heads [L, H], mlps [L]"""
    answer, distractor, position = read
    what = f"logit({quoted_token(answer)})" + (f" − logit({quoted_token(distractor)})" if distractor else "")
    what += f" at position {position}"
    n_layers, n_heads = heads.shape
    bound = float(max(np.abs(heads).max(initial=0), np.abs(mlps).max(initial=0), abs(embedding), 1e-6))
    layout, cells = grid(
        2, cols=2, h_gap=0.16, titles=["each head's output", "each MLP, and the embedding"], linked=False
    )
    (hx, hy), (bx, by) = cells
    kv = np.ascontiguousarray(np.broadcast_to(kv_head.astype(np.int32), (n_layers, n_heads)))
    rows = np.arange(n_layers, dtype=np.int32)
    data = [
        dict(
            type="heatmap",
            z=heads.astype(np.float32),
            xaxis=hx,
            yaxis=hy,
            zmid=0.0,
            zmin=-bound,
            zmax=bound,
            colorscale=get_colorscale("RdBu"),  # blue: writes toward the answer, as in the patching map
            customdata=kv,
            colorbar=dict(
                title=dict(text="logit", side="right"), thickness=12, x=layout["xaxis"]["domain"][1] + 0.01
            ),
            hovertemplate="layer %{y} · head %{x} · kv %{customdata}<br>direct effect: %{z:+.3g}"
            "<extra></extra>",
        ),
        _bars(mlps, rows, (bx, by), "MLP", "#7c3aed", "layer %{y} MLP"),
        _bars(
            np.array([embedding]),
            np.array([-1], dtype=np.int32),
            (bx, by),
            "embedding",
            "#059669",
            "embedding",
        ),
    ]
    if np.abs(biases).max(initial=0) > 0:
        data.append(_bars(biases, rows, (bx, by), "o_proj bias", "#d97706", "layer %{y} o_proj bias"))
    layout[f"yaxis{hy[1:]}"].update(
        autorange="reversed", dtick=1 if n_layers <= 32 else 2, title=dict(text="layer")
    )
    layout[f"xaxis{hx[1:]}"].update(title=dict(text="head"), dtick=max(1, n_heads // 12))
    layout[f"yaxis{by[1:]}"].update(
        autorange="reversed",
        tickmode="array",
        tickvals=[-1, *range(0, n_layers, max(1, n_layers // 10))],
        ticktext=["emb", *map(str, range(0, n_layers, max(1, n_layers // 10)))],
    )
    layout[f"xaxis{bx[1:]}"].update(title=dict(text="logit"), zeroline=True)
    parts = embedding + float(heads.sum() + mlps.sum() + biases.sum())
    return figure(
        data,
        title=f"Who writes {what}: {total:+.3f} in all (the parts sum to {parts:+.3f})",
        barmode="relative",
        showlegend=False,
        height=max(360, 140 + 16 * n_layers),
        **layout,
    )


def _bars(values: np.ndarray, rows: np.ndarray, axes: tuple[str, str], name: str, colour: str, what: str):
    """Horizontal bars of logit contributions, one a row, on the panel of `axes` (x, y)."""
    return dict(
        type="bar",
        orientation="h",
        x=values.astype(np.float32),
        y=rows,
        xaxis=axes[0],
        yaxis=axes[1],
        name=name,
        marker=dict(color=colour),
        hovertemplate=f"{what}: %{{x:+.3g}}<extra></extra>",
    )


@builds_figure
def attention_to_figure(
    weights: np.ndarray, kv_head: np.ndarray, key: tuple[int, str], query: tuple[int, str]
) -> Plot:
    """Every head's attention weight from `query` to `key` (each a position and its token), layers ×
    heads on the softmax maps' scale.  # weights [L, H], kv_head [H]"""
    n_layers, n_heads = weights.shape
    kv = np.ascontiguousarray(np.broadcast_to(kv_head.astype(np.int32), (n_layers, n_heads)))
    heatmap = dict(
        type="heatmap",
        z=weights.astype(np.float32),
        zmin=0.0,
        zmax=1.0,
        colorscale=get_colorscale("Blues"),
        customdata=kv,
        colorbar=dict(title=dict(text="attention weight", side="right"), thickness=12),
        hovertemplate="layer %{y} · head %{x} · kv %{customdata}<br>weight: %{z:.3g}<extra></extra>",
        xgap=1,
        ygap=1,
    )
    integers = dict(tickmode="linear", tick0=0, showgrid=False, zeroline=False)
    return figure(
        [heatmap],
        title=f"Heads looking at {quoted_token(key[1])} (position {key[0]}) from "
        f"{quoted_token(query[1])} (position {query[0]}): every head's attention weight",
        xaxis=dict(integers, dtick=max(1, n_heads // 12), title=dict(text="head")),
        yaxis=dict(
            integers, dtick=1 if n_layers <= 32 else 2, autorange="reversed", title=dict(text="layer")
        ),
        height=max(320, 140 + 16 * n_layers),
        margin=dict(l=70),
    )

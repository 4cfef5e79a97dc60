"""Generation, pictured: each new token's attention row over the context, and the candidates of a step.

A step's row is row q of the causal map (q = P − 1 + k for step k), so the rows of a generation are the
bottom rows of the map over the whole sequence: drawn at their query positions on token axes, with the
keys after each query hatched as in the pipeline's masked panel. The first hatched cell of a row is the
token that row chose.
"""

from __future__ import annotations

import math

import numpy as np

from explorer.figures.codec import MAP_BUDGET_BYTES, EncodedMap
from explorer.figures.common import MAX_TICK_LABELS, figure, token_label
from explorer.figures.maps import map_heatmap, masked_region
from explorer.figures.plot import Plot, builds_figure

FUTURE_HOVER = "not yet: the key comes after the query"
PROMPT_END_COLOUR = "#d97706"
BAR_COLOUR, CHOSEN_COLOUR = "#2563eb", "#d97706"


def encode_rows(rows: np.ndarray, budget_bytes: int = MAP_BUDGET_BYTES) -> EncodedMap:
    """Steps' rows [S, T]: float32 (NaN blank) while within the budget, else whole percents in uint8
    (the hatched region covers the cells past each query). A step is never pooled with another."""
    if rows.size * 4 <= budget_bytes:
        return EncodedMap("probs", rows.astype(np.float32), block=1, exact=True, limit=1.0)
    percent = np.rint(np.nan_to_num(rows) * 100).astype(np.uint8)
    return EncodedMap("probs", percent, block=1, exact=False, limit=1.0)


@builds_figure
def generation_figure(tokens: list[str], rows: np.ndarray, n_prompt: int, title: str) -> Plot:
    """One head's row for each step, over key positions 0..T−1 of the sequence so far.

    rows [S, T]: row k is step k's softmax row, the query at position P − 1 + k, NaN after it; `tokens` [T]
    the sequence's display strings; `n_prompt` P. A dotted line closes the prompt."""
    n_steps, n = rows.shape
    first = n_prompt - 1  # the query position of step 0
    encoded = encode_rows(rows)
    heatmap = map_heatmap(encoded, "p", ("x", "y"), dict(thickness=10))
    heatmap["y0"] = first
    data = [heatmap]
    if n > 1:
        data.append(masked_region(n, FUTURE_HOVER, ("x", "y")))
    prompt_end = dict(
        type="line",
        x0=n_prompt - 0.5,
        x1=n_prompt - 0.5,
        y0=first - 0.5,
        y1=first + n_steps - 0.5,
        line=dict(color=PROMPT_END_COLOUR, width=2, dash="dot"),
    )
    note = encoded.note
    return figure(
        data,
        tokens,
        title=f"{title}<br><sup>one row per new token at its query position, over the keys before it; the "
        f"first hatched cell of a row is the token it chose{'; ' + note if note else ''}</sup>",
        shapes=[prompt_end],
        xaxis=dict(range=[-0.5, n - 0.5], tickangle=-90, automargin=True),
        yaxis=dict(
            automargin=True,
            range=[first + n_steps - 0.5, first - 0.5],
            tick0=first,
            dtick=max(1, math.ceil(n_steps / MAX_TICK_LABELS)),
            title=dict(text="query"),
        ),
        height=min(720, max(280, 200 + 20 * n_steps)),
        margin=dict(l=90, r=20, t=80, b=110),
    )


@builds_figure
def candidates_figure(candidates: list[tuple[str, float]], chosen: int, title: str) -> Plot:
    """A step's candidates as bars, in the order given (most likely first); bar `chosen` is the token
    the step took."""
    probs = np.array([p for _, p in candidates], dtype=np.float32)
    picked = np.arange(len(candidates)) == chosen
    bars = dict(
        type="bar",
        x=probs,
        y=np.arange(len(candidates), dtype=np.int32),
        orientation="h",
        marker=dict(color=[CHOSEN_COLOUR if c else BAR_COLOUR for c in picked]),
        text=[f"{p:.1%}{' · chosen' if c else ''}" for p, c in zip(probs, picked, strict=True)],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="candidate %{y}<br>probability %{x:.3g}<extra></extra>",
    )
    labels = {str(i): token_label(token) for i, (token, _) in enumerate(candidates)}
    return figure(
        [bars],
        title=title,
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, float(probs.max()) * 1.35 + 1e-3)]),
        yaxis=dict(
            autorange="reversed", tickmode="linear", tick0=0, dtick=1, tickformat="d", labelalias=labels
        ),
        height=100 + 28 * len(candidates),
        margin=dict(l=100, r=120),  # room for the label of a bar that reaches 1
    )

"""Interventions on heads: the next token before and after an ablation, and the patching heatmap."""

from __future__ import annotations

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures.common import figure, quoted_token, token_label
from explorer.figures.plot import Plot, builds_figure

BEFORE_COLOUR, AFTER_COLOUR = "#2563eb", "#dc2626"


@builds_figure
def ablation_next_tokens_figure(
    tokens: list[str],
    before: np.ndarray,
    after: np.ndarray,
    ablation: str,
    logits: tuple[np.ndarray, np.ndarray],
    pair: tuple[str, str, float, float],
) -> Plot:
    """Each token's next-token probability in the plain run and in the ablated one, paired bars, in the
    order given (most likely first), hover giving its logit too; the title says what the ablation did
    to logit(a) − logit(b) of `pair` (a, b, before, after).
    # tokens [K], before [K], after [K], logits: ([K] plain, [K] ablated)"""
    before, after = before.astype(np.float32), after.astype(np.float32)
    rows = np.arange(len(tokens), dtype=np.int32)
    bars = [
        dict(
            type="bar",
            name=name,
            x=probs,
            y=rows,
            orientation="h",
            marker=dict(color=colour),
            text=[f"{p:.1%}" for p in probs],
            textposition="outside",
            customdata=logit.astype(np.float32),
            hovertemplate=f"next token %{{y}}<br>{name}: p %{{x:.3g}}, logit %{{customdata:.4g}}"
            "<extra></extra>",
        )
        for name, probs, colour, logit in (
            ("before", before, BEFORE_COLOUR, logits[0]),
            ("after", after, AFTER_COLOUR, logits[1]),
        )
    ]
    labels = {str(i): token_label(token) for i, token in enumerate(tokens)}
    top = float(max(before.max(initial=0), after.max(initial=0)))
    a, b, diff_before, diff_after = pair
    return figure(
        bars,
        title=f"Next token before and after the {ablation}<br><sup>logit({quoted_token(a)}) − "
        f"logit({quoted_token(b)}): {diff_before:+.3g} before, {diff_after:+.3g} after</sup>",
        barmode="group",
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),  # under the title
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, top * 1.3 + 1e-3)]),
        yaxis=dict(
            autorange="reversed", tickmode="linear", tick0=0, dtick=1, tickformat="d", labelalias=labels
        ),
        height=150 + 34 * len(tokens),
        margin=dict(l=100, t=104),
    )


# What each metric's patched value is called in hover, and how its clean and corrupted values read.
READS = {
    "logit_diff": ("patched logit diff", "logit {a} − {b}: clean {clean:.3g}, corrupted {corrupted:.3g}"),
    "prob": ("patched p({a})", "p({a}): clean {clean:.3g}, corrupted {corrupted:.3g}"),
    "kl": (
        "KL(clean ‖ patched)",
        "KL(clean ‖ run) of the next token: corrupted {corrupted:.3g} nats, clean 0; "
        "recovered = 1 − KL / KL(corrupted)",
    ),
}


@builds_figure
def patching_figure(
    recovered: np.ndarray,
    patched: np.ndarray,
    kv_head: np.ndarray,
    clean: float,
    corrupted: float,
    answer: str,
    distractor: str,
    metric: str = "logit_diff",
) -> Plot:
    """Recovered fraction of every head for `metric` (`explorer.engine.patch_metrics`: logit
    difference, the answer's probability, KL from the clean run), layers × heads, on a diverging scale
    centred at 0.  # recovered [L, H], patched [L, H] (the metric, each head patched), kv_head [H]"""
    n_layers, n_heads = recovered.shape
    finite = np.abs(recovered[np.isfinite(recovered)])  # not where clean and corrupted tie
    limit = float(finite.max(initial=0)) or 1.0
    hover = np.stack([np.broadcast_to(kv_head, (n_layers, n_heads)), patched], axis=-1).astype(
        np.float32
    )  # [L, H, 2]: kv head, the patched run's value
    a, b = quoted_token(answer), quoted_token(distractor)
    what, reads = READS[metric]
    heatmap = dict(
        type="heatmap",
        z=recovered.astype(np.float32),
        zmid=0.0,
        zmin=-limit,
        zmax=limit,
        colorscale=get_colorscale("RdBu"),
        colorbar=dict(title=dict(text="recovered"), thickness=12),
        customdata=hover,
        hovertemplate="layer %{y} · head %{x} · kv %{customdata[0]:d}<br>recovered %{z:.3g}"
        f"<br>{what.format(a=a)} %{{customdata[1]:.3g}}<extra></extra>",
    )
    integers = dict(tickmode="linear", tick0=0, dtick=1, showgrid=False, zeroline=False)
    return figure(
        [heatmap],
        title="Each head patched from the clean run into the corrupted one: recovered = (patched − "
        f"corrupted) / (clean − corrupted)<br>{reads.format(a=a, b=b, clean=clean, corrupted=corrupted)}",
        xaxis=dict(title=dict(text="head"), **integers),
        yaxis=dict(title=dict(text="layer"), autorange="reversed", **integers),
        height=max(340, 160 + 22 * n_layers),
        margin=dict(t=80),
    )

"""The Attention, GQA-similarity and Faithfulness views of a layer and head, from a Run: the arrays
each needs, pulled from the engine and handed to the figure builders. Nothing here draws or knows Gradio.

Looking at a layer costs one eager rerun of that layer (cached by the Run); a head's stages are
computed for that head alone. Nothing here runs the model forward. A layer whose [H, N, N] maps pass
VIEW_MAP_BYTES is never held whole: its views are computed from the layer's projections a block of
queries at a time (`explorer.views.pooled`, over `explorer.engine.blockwise`), maps pooled block by block
as the figures would pool them.
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from explorer import figures
from explorer.engine import blockwise
from explorer.engine.run import Run
from explorer.views import pooled
from explorer.views.agreement import Faithfulness, check_outputs
from explorer.views.labels import clamp_position, head_name, kv_heads
from explorer.views.rope import rope_rotation, rope_score_split

EAGER_TOLERANCE = 1e-5  # max |eager − SDPA| the parity tests hold, float32
# A layer's float32 [H, N, N] maps are held whole up to this (9 heads: 1,365 tokens); past it, block by block.
VIEW_MAP_BYTES = 64 << 20


def maps_fit(run: Run) -> bool:
    """Whether the views hold the layer's whole maps (`run.attention`), or go block by block."""
    return run.config.n_heads * run.n_tokens**2 * 4 <= VIEW_MAP_BYTES


def block_bytes() -> int:
    """Bytes of one block of rows: a quarter of the budget, for the temporaries computed beside it."""
    return VIEW_MAP_BYTES // 4


def pipeline(run: Run, layer: int, head: int, log_colours: bool = False) -> go.Figure:
    title = f"Layer {layer} · {head_name(run.config, head)}: Q·Kᵀ → ×1/√d → causal mask → softmax"
    if maps_fit(run):
        att = run.attention(layer)
        stages = {name: t.numpy() for name, t in att.head_stages(head).items()}  # each [N, N]
        mask, scale = att.mask.numpy(), att.scale
    else:
        stages, mask = pooled.head_stages(run, layer, head, block_bytes())
        scale = run.projections(layer).scale
    return figures.pipeline_figure(
        run.tokens,
        stages["scores"],
        stages["scaled"],
        mask,
        stages["masked"],
        stages["probs"],
        scale,
        title,
        log_colours,
    )


def default_zoom(run: Run, size: int = 128) -> tuple[int, int, int, int]:
    """The zoom window at first: the last `size` queries over the last `size` keys.
    # (first query, last query, first key, last key)"""
    first = max(run.n_tokens - size, 0)
    return first, run.n_tokens - 1, first, run.n_tokens - 1


def zoom(
    run: Run, layer: int, head: int, window: tuple[int, int, int, int], log_colours: bool = False
) -> go.Figure:
    """Exact values of a window (first query, last query, first key, last key; inclusive, clamped to
    the prompt and put in order) of one head's masked scores and softmax."""
    q0, q1, k0, k1 = (clamp_position(run, p) for p in window)
    (q0, q1), (k0, k1) = sorted((q0, q1)), sorted((k0, k1))
    cells = (q1 - q0 + 1) * (k1 - k0 + 1)
    if cells > figures.ZOOM_CELLS:
        raise ValueError(
            f"A zoom window holds at most {figures.ZOOM_CELLS:,} cells (256 × 256, or 64 × 1,024 …); "
            f"queries {q0}–{q1} × keys {k0}–{k1} is {cells:,}. Narrow one of the ranges."
        )
    if maps_fit(run):
        stages = run.attention(layer).head_stages(head)
        masked, probs = (stages[name][q0 : q1 + 1, k0 : k1 + 1] for name in ("masked", "probs"))
    else:
        p, parts = run.projections(layer), {"masked": [], "probs": []}
        for start, stop in blockwise.query_blocks(run.n_tokens, 4, block_bytes()):
            start, stop = max(start, q0), min(stop, q1 + 1)
            if start < stop:
                for name, rows in blockwise.head_rows(p, head, start, stop).items():
                    if name in parts:
                        parts[name].append(rows[:, k0 : k1 + 1])
        masked, probs = (torch.cat(parts[name]) for name in ("masked", "probs"))
    return figures.zoom_figure(
        run.tokens,
        masked.numpy(),
        probs.numpy(),
        (q0, k0),
        f"Layer {layer} · {head_name(run.config, head)}: queries {q0}–{q1} × keys {k0}–{k1}, exact values",
        log_colours,
    )


def all_heads(run: Run, layer: int, log_colours: bool = False) -> go.Figure:
    """Every head's map, with the layer's faithfulness check stated under the title."""
    check = eager_check(run, layer)
    if maps_fit(run):
        return _all_heads_figure(run, layer, run.attention(layer).probs.numpy(), check, log_colours)
    return _all_heads_figure(run, layer, _pooled_layer(run, layer).head_maps, check, log_colours)


def _pooled_layer(run: Run, layer: int) -> pooled.LayerViews | pooled.LayerPass:
    """Every head's pooled map and their similarity past the budget: as the run keeps them once the
    layer was shown, else from a pass without the output."""
    kept = pooled.kept_layer_views(run, layer)
    return kept if kept is not None else pooled.layer_pass(run, layer, block_bytes(), output=False)


def _all_heads_figure(
    run: Run, layer: int, maps_of_heads, check: Faithfulness, log_colours: bool = False
) -> go.Figure:
    title = f"Layer {layer}: every head's softmax map, framed by the kv head it shares"
    return figures.all_heads_figure(
        run.tokens, maps_of_heads, kv_heads(run.config), title, log_colours, subtitle=check.summary()
    )


def head_similarity(run: Run, layer: int) -> go.Figure:
    if maps_fit(run):
        att = run.attention(layer)
        unit = torch.nn.functional.normalize(att.probs.flatten(1), dim=1)  # [H, N·N], unit rows
        return _similarity_figure(run, layer, unit @ unit.T)  # [H, H] cosine of every pair of maps
    return _similarity_figure(run, layer, _pooled_layer(run, layer).similarity)


def _similarity_figure(run: Run, layer: int, similarity: torch.Tensor) -> go.Figure:
    title = f"Layer {layer}: how alike the heads' attention maps are"
    return figures.head_similarity_figure(similarity.numpy(), kv_heads(run.config), title)


def eager_check(run: Run, layer: int) -> Faithfulness:
    """The layer's eager rerun against its fast path: the whole layer (`run.attention`), or block by
    block when its maps do not fit; computed once per run and layer, then kept with the run."""
    if not maps_fit(run):
        return pooled.layer_views(run, layer, block_bytes()).check
    kept = run.kept.get(("faithfulness", layer))
    if kept is None:
        eager = run.attention(layer).output
        kept = check_outputs(eager, run.sdpa_output(layer), run.eager_seconds[layer])
        run.kept[("faithfulness", layer)] = kept
    return kept


def faithfulness(run: Run, layer: int) -> go.Figure:
    return _faithfulness_figure(run, layer, eager_check(run, layer))


def _faithfulness_figure(run: Run, layer: int, check: Faithfulness) -> go.Figure:
    return figures.faithfulness_figure(
        layer,
        check.max_abs_diff,
        check.tolerance,
        check.explained(),
        run.forward_seconds,
        check.eager_seconds,
        run.config.n_layers,
    )


def head_figures(
    run: Run, layer: int, head: int, query: int, key: int, log_colours: bool = False
) -> list[go.Figure]:
    """What a head switch sends: the pipeline and the RoPE view of q and k."""
    return [
        pipeline(run, layer, head, log_colours),
        rope_rotation(run, layer, head, query, key),
        rope_score_split(run, layer, head, query, key),
    ]


def layer_figures(run: Run, layer: int, log_colours: bool = False) -> list[go.Figure]:
    """What depends on the layer alone: every head's map, their similarity, the faithfulness check
    (past the budget, all three from one pass over the layer's maps, kept with the run)."""
    if maps_fit(run):
        return [all_heads(run, layer, log_colours), head_similarity(run, layer), faithfulness(run, layer)]
    kept = pooled.layer_views(run, layer, block_bytes())
    return [
        _all_heads_figure(run, layer, kept.head_maps, kept.check, log_colours),
        _similarity_figure(run, layer, kept.similarity),
        _faithfulness_figure(run, layer, kept.check),
    ]

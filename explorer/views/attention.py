"""The Attention, GQA-similarity and Faithfulness views of a layer and head, from a Run: the arrays
each needs, pulled from the engine and handed to the figure builders. Nothing here draws or knows Gradio.

Looking at a layer costs one eager rerun of that layer (cached by the Run); a head's stages are
computed for that head alone. Nothing here runs the model forward. A layer whose [H, N, N] maps pass
VIEW_MAP_BYTES is never held whole: its views are computed from the layer's projections a block of
queries at a time (`explorer.views.pooled`, over `explorer.engine.blockwise`), maps pooled block by block
as the figures would pool them.

A `MapStyle` says how the softmax maps are drawn: on log colours, and weighted by what each key writes
(`explorer.views.weighting`: each row of ‖α·v·W_O‖ over its sum, hover giving α and ‖α·v·W_O‖ too).
"""

from __future__ import annotations

import numpy as np
import torch

from explorer import figures
from explorer.engine import blockwise
from explorer.engine.run import Run
from explorer.figures import MapStyle
from explorer.figures.plot import Plot
from explorer.views import pooled
from explorer.views.agreement import Faithfulness, check_outputs
from explorer.views.labels import clamp_position, head_name, kv_heads, layer_title
from explorer.views.rope import rope_rotation, rope_score_split
from explorer.views.weighting import key_shares, key_writes

EAGER_TOLERANCE = 1e-5  # max |eager − SDPA| the parity tests hold, float32
# A layer's float32 [H, N, N] maps are held whole up to this (9 heads: 1,365 tokens); past it, block by block.
VIEW_MAP_BYTES = 64 << 20


def maps_fit(run: Run) -> bool:
    """Whether the views hold the layer's whole maps (`run.attention`), or go block by block."""
    return run.config.n_heads * run.n_tokens**2 * 4 <= VIEW_MAP_BYTES


def block_bytes() -> int:
    """Bytes of one block of rows: a quarter of the budget, for the temporaries computed beside it."""
    return VIEW_MAP_BYTES // 4


# Every head's pipeline of a layer goes to the page at once (the page switches heads itself): its maps
# stay exact float32 while all heads' scores and softmax lower triangles fit this, else 8-bit codes.
PIPELINE_EXACT_BYTES = 512 << 10


def pipeline_exact(run: Run) -> bool:
    """Whether a layer's pipelines draw exact values: every head's N × N scores and N(N+1)/2 softmax
    values in float32 within PIPELINE_EXACT_BYTES (the bundled model's 8 heads: up to 104 tokens)."""
    n = run.n_tokens
    return run.config.n_heads * (n * n + n * (n + 1) // 2) * 4 <= PIPELINE_EXACT_BYTES


WEIGHTED_NOTE = "weighted by what each key writes: ‖α·v·W_O‖ over its row's sum (Kobayashi et al. 2020)"


def scale_name(config) -> str:
    """What the scores are scaled by, as the pipeline names it: 1/√d, or Gemma's 1/√query_pre_attn_scalar."""
    named = config.query_pre_attn_scalar
    return "1/√d" if named is None or named == config.head_dim else f"1/√{named:g}"


def pipeline(run: Run, layer: int, head: int, style: MapStyle = MapStyle()) -> Plot:
    """The head's stages, Q·Kᵀ to softmax, side by side (`figures.pipeline_figure`)."""
    return pipeline_parts(run, layer, head, style).plot()


def pipeline_parts(run: Run, layer: int, head: int, style: MapStyle = MapStyle()) -> figures.PipelineParts:
    """The head's `pipeline` before it is a figure: its traces, layout and title. A layer's update sends
    every head's (the page switches heads without asking the server), the others' as traces and title."""
    stages_before = "QK-norm → RoPE → " if run.config.qk_norm else ""  # what q and k went through
    window = run.config.window(layer)
    mask_name = "causal mask" if window is None else f"sliding-window mask ({window} keys)"
    title = (
        f"{layer_title(run.config, layer)} · {head_name(run.config, head)}: {stages_before}Q·Kᵀ → "
        f"×{scale_name(run.config)} → {mask_name} → softmax"
    )
    if maps_fit(run):
        att = run.attention(layer)
        stages = {name: t.numpy() for name, t in att.head_stages(head).items()}  # each [N, N]
        mask, scale = att.mask.numpy(), att.scale
    else:
        stages, mask = pooled.head_stages(run, layer, head, block_bytes(), style.weighted)
        scale = run.projections(layer).scale
    softmax, writes = stages["probs"], None
    if style.weighted:
        title += f"<br><sup>softmax {WEIGHTED_NOTE}</sup>"
        if isinstance(softmax, np.ndarray):  # whole maps (pooled ones come weighted)
            probs, norms = torch.from_numpy(softmax), run.projections(layer).value_norms[head]
            shares, sums = key_shares(probs, norms)
            softmax, writes = shares.numpy(), key_writes(probs, norms, sums)
    scores, scaled, masked = (stages[name] for name in ("scores", "scaled", "masked"))
    return figures.pipeline_parts(
        run.tokens,
        scores,
        scaled,
        mask,
        masked,
        softmax,
        scale,
        title,
        style,
        key_writes=writes,
        qk_norms=qk_norms(run, layer, head) if run.config.qk_norm else None,
        window=window,
        scale_name=scale_name(run.config),
        exact=pipeline_exact(run),
    )


def qk_norms(run: Run, layer: int, head: int) -> dict[str, np.ndarray]:
    """The head's queries and its kv head's keys, their norms before and after QK-norm.  # each [N]"""
    p = run.projections(layer)
    kv = int(p.kv_head[head])
    vectors = {"q": p.q[head], "q_normed": p.q_normed[head], "k": p.k[kv], "k_normed": p.k_normed[kv]}
    return {name: torch.linalg.vector_norm(t, dim=-1).numpy() for name, t in vectors.items()}


def default_zoom(run: Run, size: int = 128) -> tuple[int, int, int, int]:
    """The zoom window at first: the last `size` queries over the last `size` keys.
    # (first query, last query, first key, last key)"""
    first = max(run.n_tokens - size, 0)
    return first, run.n_tokens - 1, first, run.n_tokens - 1


def zoom(
    run: Run, layer: int, head: int, window: tuple[int, int, int, int], style: MapStyle = MapStyle()
) -> Plot:
    """Exact values of a window (first query, last query, first key, last key; inclusive, clamped to
    the prompt and put in order) of one head's masked scores and softmax (weighted in `style`: each
    key's share of its whole row, hover giving α and ‖α·v·W_O‖)."""
    q0, q1, k0, k1 = (clamp_position(run, p) for p in window)
    (q0, q1), (k0, k1) = sorted((q0, q1)), sorted((k0, k1))
    cells = (q1 - q0 + 1) * (k1 - k0 + 1)
    if cells > figures.ZOOM_CELLS:
        raise ValueError(
            f"A zoom window holds at most {figures.ZOOM_CELLS:,} cells (256 × 256, or 64 × 1,024 …); "
            f"queries {q0}–{q1} × keys {k0}–{k1} is {cells:,}. Narrow one of the ranges."
        )
    norms = run.projections(layer).value_norms[head]  # [N]
    parts = {"masked": [], "probs": [], "shares": [], "sums": []}

    def cut(rows: dict[str, torch.Tensor]):  # each [R, N]: the window's queries over every key
        if style.weighted:  # each key's share of its whole row, not of the window's
            rows["shares"], rows["sums"] = key_shares(rows["probs"], norms)
        for name in parts.keys() & rows.keys():
            parts[name].append(rows[name] if name == "sums" else rows[name][:, k0 : k1 + 1])

    if maps_fit(run):
        cut({name: t[q0 : q1 + 1] for name, t in run.attention(layer).head_stages(head).items()})
    else:
        for start, stop in blockwise.query_blocks(run.n_tokens, 4, block_bytes()):
            start, stop = max(start, q0), min(stop, q1 + 1)
            if start < stop:
                cut(blockwise.head_rows(run.projections(layer), head, start, stop))
    window = {name: torch.cat(each) for name, each in parts.items() if each}
    cells = f"queries {q0}–{q1} × keys {k0}–{k1}, exact values"
    title = f"{layer_title(run.config, layer)} · {head_name(run.config, head)}: {cells}"
    softmax, writes = window["probs"], None
    if style.weighted:
        softmax, writes = window["shares"], key_writes(window["probs"], norms[k0 : k1 + 1], window["sums"])
        title += f"<br><sup>softmax {WEIGHTED_NOTE}</sup>"
    return figures.zoom_figure.plot(
        run.tokens, window["masked"].numpy(), softmax.numpy(), (q0, k0), title, style, writes
    )


def all_heads(run: Run, layer: int, style: MapStyle = MapStyle()) -> Plot:
    """Every head's map (weighted in `style`), with the layer's faithfulness check stated under the title."""
    if maps_fit(run):
        return _all_heads_figure(run, layer, None, eager_check(run, layer), style)
    kept = pooled.layer_views(run, layer, block_bytes(), style.weighted)
    return _all_heads_figure(run, layer, kept, kept.check, style)


def _pooled_layer(run: Run, layer: int) -> pooled.LayerViews | pooled.LayerPass:
    """Every head's pooled map and their similarity past the budget: as the run keeps them once the
    layer was shown, else from a pass without the output."""
    kept = pooled.kept_layer_views(run, layer)
    return kept if kept is not None else pooled.layer_pass(run, layer, block_bytes(), output=False)


def _all_heads_figure(
    run: Run, layer: int, kept: pooled.LayerViews | None, check: Faithfulness, style: MapStyle
) -> Plot:
    """Every head's map from the whole maps, or from what the run `kept` of the layer's pass."""
    what = "softmax map weighted by ‖v·W_O‖ (each row over its sum)" if style.weighted else "softmax map"
    title = f"{layer_title(run.config, layer)}: every head's {what}, framed by the kv head it shares"
    writes = None
    if kept is not None:
        maps = kept.weighted_maps if style.weighted else kept.head_maps
    elif style.weighted:
        att = run.attention(layer)
        shares, sums = key_shares(att.probs, att.value_norms)  # [H, N, N], [H, N]
        maps = shares.numpy()
        writes = [key_writes(*each) for each in zip(att.probs, att.value_norms, sums, strict=True)]
    else:
        maps = run.attention(layer).probs.numpy()
    kv, window = kv_heads(run.config), run.config.window(layer)
    return figures.all_heads_figure.plot(run.tokens, maps, kv, title, style, check.summary(), writes, window)


def head_similarity(run: Run, layer: int) -> Plot:
    if maps_fit(run):
        att = run.attention(layer)
        unit = torch.nn.functional.normalize(att.probs.flatten(1), dim=1)  # [H, N·N], unit rows
        return _similarity_figure(run, layer, unit @ unit.T)  # [H, H] cosine of every pair of maps
    return _similarity_figure(run, layer, _pooled_layer(run, layer).similarity)


def _similarity_figure(run: Run, layer: int, similarity: torch.Tensor) -> Plot:
    title = f"Layer {layer}: how alike the heads' attention maps are"
    return figures.head_similarity_figure.plot(similarity.numpy(), kv_heads(run.config), title)


def eager_check(run: Run, layer: int) -> Faithfulness:
    """The layer's eager rerun against its fast path: the whole layer (`run.attention`), or block by
    block when its maps do not fit; computed once per run and layer, then kept with the run."""
    if not maps_fit(run):
        return pooled.layer_views(run, layer, block_bytes()).check

    def compute(_) -> Faithfulness:
        eager = run.attention(layer).output
        return check_outputs(eager, run.sdpa_output(layer), run.eager_seconds[layer])

    return run.memo(("faithfulness", layer), compute)


def faithfulness(run: Run, layer: int) -> Plot:
    return _faithfulness_figure(run, layer, eager_check(run, layer))


def _faithfulness_figure(run: Run, layer: int, check: Faithfulness) -> Plot:
    return figures.faithfulness_figure.plot(
        layer,
        check.max_abs_diff,
        check.tolerance,
        check.explained(),
        run.forward_seconds,
        check.eager_seconds,
        run.config.n_layers,
    )


def head_figures(
    run: Run, layer: int, head: int, query: int, key: int, style: MapStyle = MapStyle()
) -> list[Plot]:
    """What a head switch sends: the pipeline and the RoPE view of q and k."""
    return [
        pipeline(run, layer, head, style),
        rope_rotation(run, layer, head, query, key),
        rope_score_split(run, layer, head, query, key),
    ]


def layer_figures(run: Run, layer: int, style: MapStyle = MapStyle()) -> list[Plot]:
    """What depends on the layer alone: every head's map, their similarity, the faithfulness check
    (past the budget, all three from one pass over the layer's maps, kept with the run)."""
    if maps_fit(run):
        return [all_heads(run, layer, style), head_similarity(run, layer), faithfulness(run, layer)]
    kept = pooled.layer_views(run, layer, block_bytes(), style.weighted)
    return [
        _all_heads_figure(run, layer, kept, kept.check, style),
        _similarity_figure(run, layer, kept.similarity),
        _faithfulness_figure(run, layer, kept.check),
    ]


def prepare_layer(run: Run, layer: int, style: MapStyle = MapStyle()) -> bool:
    """Make `layer_figures` of `layer` quick ahead of time, where that pays: past the budget its one
    pass over the layer's maps is computed and kept with the run (a layer switch then draws from it);
    whole maps are left alone (cheap to compute, and large to hold: they would push the layer on
    screen out of the run's cache). Whether anything was computed."""
    n_layers = run.config.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be a whole number in [0, {n_layers - 1}], got {layer!r}")
    if maps_fit(run):
        return False
    kept = pooled.kept_layer_views(run, layer)
    if kept is not None and (kept.weighted_maps is not None or not style.weighted):
        return False
    pooled.layer_views(run, layer, block_bytes(), style.weighted)
    return True

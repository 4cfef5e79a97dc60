"""What the app shows, from a Run: the arrays each view needs, pulled from the engine and handed to the
figure builders. The UI calls these and only wires; nothing here draws or knows Gradio.

Looking at a layer costs one eager rerun of that layer (cached by the Run); a head's stages are
computed for that head alone. Nothing here runs the model forward. A layer whose [H, N, N] maps pass
VIEW_MAP_BYTES is never held whole: its views are computed from the layer's projections a block of
queries at a time (`explorer.pooled`, over `explorer.blockwise`), maps pooled block by block as the
figures would pool them.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import torch

from explorer import blockwise, figures, heads, pooled, rope
from explorer.attention import kv_head_map
from explorer.config import ModelConfig
from explorer.interventions import PatchResult
from explorer.run import Run
from explorer.tokens import next_token_labels

EAGER_TOLERANCE = 1e-5  # max |eager − SDPA| the parity tests hold, float32
TOP_NEXT_TOKENS = 10
# A layer's float32 [H, N, N] maps are held whole up to this (9 heads: 1,365 tokens); past it, block by block.
VIEW_MAP_BYTES = 64 << 20


def maps_fit(run: Run) -> bool:
    """Whether the views hold the layer's whole maps (`run.attention`), or go block by block."""
    return run.config.n_heads * run.n_tokens**2 * 4 <= VIEW_MAP_BYTES


def _block_bytes() -> int:
    """Bytes of one block of rows: a quarter of the budget, for the temporaries computed beside it."""
    return VIEW_MAP_BYTES // 4


def head_name(config: ModelConfig, head: int) -> str:
    """A query head with the key/value head it reads, as the app names it: "head 5 · kv 1"."""
    return f"head {head} · kv {_kv_head(config)[head]}"


def layer_head_name(config: ModelConfig, layer: int, head: int) -> str:
    """A head among every layer's, as the Intervene tab lists it: "3.5 · kv 1"."""
    return f"{layer}.{head} · kv {_kv_head(config)[head]}"


def default_positions(run: Run) -> tuple[int, int]:
    """The RoPE view's query and key at first: the last token and the one before it."""
    return run.n_tokens - 1, max(run.n_tokens - 2, 0)


def pipeline(run: Run, layer: int, head: int, log_colours: bool = False) -> go.Figure:
    title = f"Layer {layer} · {head_name(run.config, head)}: Q·Kᵀ → ×1/√d → causal mask → softmax"
    if maps_fit(run):
        att = run.attention(layer)
        stages = {name: t.numpy() for name, t in att.head_stages(head).items()}  # each [N, N]
        mask, scale = att.mask.numpy(), att.scale
    else:
        stages, mask = pooled.head_stages(run, layer, head, _block_bytes())
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
        for start, stop in blockwise.query_blocks(run.n_tokens, 4, _block_bytes()):
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
    if maps_fit(run):
        att = run.attention(layer)
        return _all_heads_figure(run, layer, att.probs.numpy(), log_colours)
    return _all_heads_figure(run, layer, _pooled_layer(run, layer).head_maps, log_colours)


def _pooled_layer(run: Run, layer: int) -> pooled.LayerViews | pooled.LayerPass:
    """Every head's pooled map and their similarity past the budget: as the run keeps them once the
    layer was shown, else from a pass without the output."""
    kept = pooled.kept_layer_views(run, layer)
    return kept if kept is not None else pooled.layer_pass(run, layer, _block_bytes(), output=False)


def _all_heads_figure(run: Run, layer: int, maps_of_heads, log_colours: bool = False) -> go.Figure:
    title = f"Layer {layer}: every head's softmax map, framed by the kv head it shares"
    return figures.all_heads_figure(run.tokens, maps_of_heads, _kv_head(run.config), title, log_colours)


def rope_angles(run: Run) -> go.Figure:
    inv_freq = rope.config_inverse_frequencies(run.config)  # [d/2]
    angles = rope.angles(torch.arange(run.n_tokens), inv_freq)  # [N, d/2]
    return figures.rope_angles_figure(run.tokens, angles.numpy(), inv_freq.float().numpy())


def rope_wavelengths(run: Run) -> go.Figure:
    wavelengths = rope.wavelengths(rope.config_inverse_frequencies(run.config))  # [d/2]
    return figures.wavelengths_figure(wavelengths.numpy(), run.config.context_length, run.n_tokens)


def _query_and_key(run: Run, layer: int, head: int, query: int, key: int):
    """The head's q at `query` and its kv head's k at `key`, as pairs before and after RoPE.
    # each [d/2, 2]"""
    p = run.projections(layer)
    kv = int(p.kv_head[head])
    q, q_rot = rope.pairs(p.q[head, query]), rope.pairs(p.q_rot[head, query])
    k, k_rot = rope.pairs(p.k[kv, key]), rope.pairs(p.k_rot[kv, key])
    return q, q_rot, k, k_rot


def rope_rotation(run: Run, layer: int, head: int, query: int, key: int) -> go.Figure:
    query, key = clamp_position(run, query), clamp_position(run, key)
    q, q_rot, k, k_rot = (t.numpy() for t in _query_and_key(run, layer, head, query, key))
    return figures.rotation_figure(q, q_rot, k, k_rot, (query, run.tokens[query]), (key, run.tokens[key]))


def rope_score_split(run: Run, layer: int, head: int, query: int, key: int) -> go.Figure:
    query, key = clamp_position(run, query), clamp_position(run, key)
    q, q_rot, k, k_rot = _query_and_key(run, layer, head, query, key)
    with_rope = (q_rot * k_rot).sum(-1)  # [d/2], sums to scores[head, query, key]
    without_rope = (q * k).sum(-1)  # [d/2]
    wavelengths = rope.wavelengths(run.projections(layer).inv_freq)
    return figures.score_split_figure(
        with_rope.numpy(),
        without_rope.numpy(),
        wavelengths.numpy(),
        (query, run.tokens[query]),
        (key, run.tokens[key]),
    )


def clamp_position(run: Run, position: int | float | None) -> int:
    return int(min(max(int(position or 0), 0), run.n_tokens - 1))


def gqa_diagram(config: ModelConfig) -> go.Figure:
    return figures.gqa_diagram_figure(_kv_head(config))


def head_similarity(run: Run, layer: int) -> go.Figure:
    if maps_fit(run):
        att = run.attention(layer)
        unit = torch.nn.functional.normalize(att.probs.flatten(1), dim=1)  # [H, N·N], unit rows
        return _similarity_figure(run, layer, unit @ unit.T)  # [H, H] cosine of every pair of maps
    return _similarity_figure(run, layer, _pooled_layer(run, layer).similarity)


def _similarity_figure(run: Run, layer: int, similarity: torch.Tensor) -> go.Figure:
    title = f"Layer {layer}: how alike the heads' attention maps are"
    return figures.head_similarity_figure(similarity.numpy(), _kv_head(run.config), title)


def kv_cache_bytes_per_token(config: ModelConfig, n_kv_heads: int, bytes_per_value: int) -> int:
    """K and V, every layer, one token."""
    return 2 * config.n_layers * n_kv_heads * config.head_dim * bytes_per_value


def kv_cache_contexts(config: ModelConfig, count: int = 6) -> tuple[int, ...]:
    """The contexts the KV-cache chart shows: halving down from the model's own context."""
    context = config.context_length
    return tuple(sorted({max(context >> k, 1) for k in range(count)}))


def kv_cache(config: ModelConfig, bytes_per_value: int, current: tuple[int, int] | None = None) -> go.Figure:
    """`current`: (tokens in a live cache, its bytes), shown beside MHA and MQA at that length."""
    layouts = {
        f"this model ({config.n_kv_heads} kv heads)": config.n_kv_heads,
        f"as MHA ({config.n_heads} kv heads)": config.n_heads,
        "as MQA (1 kv head)": 1,
    }
    per_token = {name: kv_cache_bytes_per_token(config, n, bytes_per_value) for name, n in layouts.items()}
    return figures.kv_cache_figure(per_token, kv_cache_contexts(config), current)


def eager_max_abs_diff(run: Run, layer: int) -> float:
    """max |eager − SDPA| of the layer's attention output."""
    return _eager_check(run, layer)[0]


def _eager_check(run: Run, layer: int) -> tuple[float, float]:
    """max |eager − SDPA| of the layer's output, and the seconds the eager path took: the whole layer
    (`run.attention`), or block by block (kept with the run) when its maps do not fit."""
    if maps_fit(run):
        diff = float((run.attention(layer).output - run.sdpa_output(layer)).abs().max())
        return diff, run.eager_seconds[layer]
    kept = pooled.layer_views(run, layer, _block_bytes())
    return kept.max_abs_diff, kept.eager_seconds


def faithfulness(run: Run, layer: int) -> go.Figure:
    return _faithfulness_figure(run, layer, *_eager_check(run, layer))


def _faithfulness_figure(run: Run, layer: int, diff: float, eager_seconds: float) -> go.Figure:
    return figures.faithfulness_figure(
        layer, diff, EAGER_TOLERANCE, run.forward_seconds, eager_seconds, run.config.n_layers
    )


def head_profile(run: Run) -> dict[str, np.ndarray]:
    """The overview's scores, every layer and head, computed layer by layer (block by block when a
    layer's maps do not fit).  # {name: [L, H]}"""
    if maps_fit(run):
        return {name: scores.numpy() for name, scores in heads.prompt_profile(run).items()}
    ids = torch.tensor(run.ids)
    rows = [
        blockwise.profile(run.projections(layer), ids, _block_bytes()) for layer in range(run.config.n_layers)
    ]
    return {name: torch.stack([row[name] for row in rows]).numpy() for name in heads.PROFILE_SCORES}


def overview(run: Run, profile: dict[str, np.ndarray]) -> go.Figure:
    return figures.profile_figure(profile, _kv_head(run.config))


def next_tokens(run: Run) -> go.Figure:
    probs, ids = run.next_token_probs().topk(TOP_NEXT_TOKENS)
    tokens = next_token_labels(run.explorer.tokenizer, run.ids, ids.tolist())  # as read after the prompt
    return figures.next_tokens_figure(list(zip(tokens, probs.tolist(), strict=True)))


def _kv_head(config: ModelConfig) -> np.ndarray:
    return kv_head_map(config.n_heads, config.n_kv_heads).numpy()


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
    kept = pooled.layer_views(run, layer, _block_bytes())
    return [
        _all_heads_figure(run, layer, kept.head_maps, log_colours),
        _similarity_figure(run, layer, kept.similarity),
        _faithfulness_figure(run, layer, kept.max_abs_diff, kept.eager_seconds),
    ]


def plot_payload(fig: go.Figure) -> dict[str, str]:
    """A figure as the app sends it to the browser (Gradio's plot data), with its export settings."""
    return {"type": "plotly", "plot": figures.to_json(fig, figures.export_config(fig), compact=True)}


def update_payload_bytes(run: Run, layer: int, head: int) -> int:
    """Bytes of the JSON one layer switch sends, figures as the app sends them: `head_figures`
    (pipeline, RoPE rotation and score split) and `layer_figures` (all heads, head similarity,
    faithfulness). A head switch sends the first three alone."""
    query, key = default_positions(run)
    update = head_figures(run, layer, head, query, key) + layer_figures(run, layer)
    return sum(len(json.dumps(plot_payload(fig), ensure_ascii=False).encode()) for fig in update)


# Interventions (explorer.interventions): an ablated run beside the plain one, and a patching sweep.

ABLATION_TOP_TOKENS = 8  # per run; the figure shows the union of both runs' top tokens


def ablation_next_token_ids(plain: Run, ablated: Run, k: int = ABLATION_TOP_TOKENS) -> list[int]:
    """The k most likely next tokens of either run, most likely (in either) first."""
    if plain.ids != ablated.ids:
        raise ValueError("the plain and the ablated run must be of the same prompt")
    before, after = plain.next_token_probs(), ablated.next_token_probs()  # [vocab] each
    ids = set(before.topk(k).indices.tolist()) | set(after.topk(k).indices.tolist())
    return sorted(ids, key=lambda i: -max(float(before[i]), float(after[i])))


def ablation_next_tokens(plain: Run, ablated: Run) -> go.Figure:
    ids = ablation_next_token_ids(plain, ablated)
    before, after = plain.next_token_probs()[ids], ablated.next_token_probs()[ids]  # [K] each
    tokens = next_token_labels(plain.explorer.tokenizer, plain.ids, ids)  # as read after the prompt
    label = str(ablated.ablation) if ablated.ablation else "ablation of no head"
    return figures.ablation_next_tokens_figure(tokens, before.numpy(), after.numpy(), label)


def patching(result: PatchResult) -> go.Figure:
    return figures.patching_figure(
        result.recovered.numpy(),
        result.logit_diff.numpy(),
        result.kv_head.numpy(),
        result.clean_logit_diff,
        result.corrupted_logit_diff,
        result.answer,
        result.distractor,
    )

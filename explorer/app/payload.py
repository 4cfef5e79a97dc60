"""What the app sends for a figure (Gradio's plot data: the figure's compact JSON and its export
settings), and the layer view's packs: a layer's shown head, and every other head's as what differs
from it (`codec.differences`), so the page switches heads without asking the server."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import PurePath

from explorer import figures
from explorer.engine.run import Run
from explorer.figures import PipelineParts
from explorer.figures.codec import MAP_BUDGET_BYTES, differences
from explorer.figures.plot import Plot
from explorer.views.attention import layer_figures, pipeline, pipeline_parts
from explorer.views.rope import default_positions, rope_rotation, rope_score_split

# A layer kept beside the one drawn carries every head's pipeline while their 8-bit scores and softmax
# lower triangles fit this: SmolLM2's 9 heads up to 256 tokens (0.95 MB, deflated), the bundled model's 8.
EVERY_HEAD_BYTES = 870 << 10


# A layer drawn carries the shown head's pipeline alone, and the page asks for the other heads' once it
# has drawn it (`other_heads`: an answer of their own, so the layer draws as soon as it can) while their
# 8-bit maps (three a head, each pooled to MAP_BUDGET_BYTES) fit this: 16 heads.
OTHER_HEADS_BYTES = 12 << 20


# The layers beside the one drawn that the page keeps, to step to with no request: as many as fit this
# (both, up to SmolLM2's 2,048 tokens).
NEIGHBOUR_BYTES = 4 << 20


def heads_fit(run: Run) -> bool:
    """Whether a layer's pack can carry every head's pipeline (`pipelines_payload`): a layer kept beside
    the one drawn then switches heads with no request from the moment it is drawn."""
    n = run.n_tokens
    return run.config.n_heads * (n * n + n * (n + 1) // 2) <= EVERY_HEAD_BYTES


def others_follow(run: Run) -> bool:
    """Whether the page asks for the other heads' pipelines once it has drawn a layer (`other_heads`),
    to switch heads itself from then on."""
    per_head = 3 * min(run.n_tokens**2, MAP_BUDGET_BYTES)
    return (run.config.n_heads - 1) * per_head <= OTHER_HEADS_BYTES


def plot_payload(fig: Plot, filename: str = "attention-explorer") -> dict[str, str]:
    """A figure as the app sends it to the browser (Gradio's plot data), with its export settings: its
    SVG and PNG downloads are named `filename`."""
    return {"type": "plotly", "plot": figures.json_text(sent_figure(fig, filename))}


def sent_figure(fig: Plot, filename: str = "attention-explorer") -> dict:
    """What `plot_payload` sends of a figure, as plain values (`figures.sendable`, compact)."""
    return figures.sendable(fig, figures.export_config(fig, filename), compact=True)


def pipeline_payload(
    run: Run,
    layer: int,
    head: int,
    style: figures.MapStyle = figures.MapStyle(),
    name: Callable[[int], str] = lambda head: "attention-explorer",
    every_head: bool = False,
) -> dict[str, str]:
    """Head `head`'s pipeline as the app sends it, marked with what the page asks for the other heads by
    once it has drawn it ("layer,head,fingerprint": `other_heads`) while `others_follow`; with
    `every_head` (a layer kept beside the one drawn), carrying every other head's instead while they
    fit (`heads_fit`, `pipelines_payload`). Each head's downloads are named `name(head)`."""
    shown = sent_figure(pipeline(run, layer, head, style), name(head))
    if every_head and heads_fit(run):
        return pipelines_payload(shown, _others(run, layer, head, style, name, shown))
    if others_follow(run):  # what the page asks for: this layer and head, and this very figure
        return marked(shown, others=f"{layer},{head},{_fingerprint(shown)}")
    return {"type": "plotly", "plot": figures.json_text(shown)}


def other_heads(
    run: Run,
    layer: int,
    head: int,
    fingerprint: str,
    style: figures.MapStyle = figures.MapStyle(),
    name: Callable[[int], str] = lambda head: "attention-explorer",
) -> dict | None:
    """The other heads' pipelines of the layer the page shows (head `head`'s, whose figure as sent has
    `fingerprint`: `asked_heads`), as what differs from it (`codec.differences`):
    {"others": "layer,head,fingerprint", "heads": [...]}. None when the page's figure is not the one
    this run and style draw (another prompt, model or style since)."""
    shown = sent_figure(pipeline(run, layer, head, style), name(head))
    if not others_follow(run) or _fingerprint(shown) != fingerprint:
        return None
    heads = differences(shown, _others(run, layer, head, style, name, shown))
    return {"others": f"{layer},{head},{fingerprint}", "heads": heads}


def _others(run: Run, layer: int, head: int, style, name, shown: dict) -> dict[int, dict]:
    """Every other head's pipeline as sent, built against the shown head's (`head_figure`)."""
    return {
        h: head_figure(shown, pipeline_parts(run, layer, h, style), name(h))
        for h in range(run.config.n_heads)
        if h != head
    }


def view_key(run: Run, style: figures.MapStyle) -> str:
    """What the layer values of one view share: the model, the prompt's tokens, the ablation and the
    map style. The page keeps neighbouring layers' values of its view alone."""
    described = repr((run.explorer.name, run.ids, run.ablation, str(run.edits or ""), style))
    return hashlib.blake2b(described.encode(), digest_size=12).hexdigest()


def value_bytes(value: dict) -> int:
    """JSON bytes of a component's value as sent."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _fingerprint(shown: dict) -> str:
    return hashlib.blake2b(figures.json_text(shown).encode(), digest_size=12).hexdigest()


def asked_heads(run: Run, ask: str) -> tuple[int, int, str]:
    """The layer, head and fingerprint of "layer,head,fingerprint,nonce" (`pipeline_payload`'s, as the
    page asks for the other heads), checked against the run's model."""
    asked = re.fullmatch(r"(\d{1,4}),(\d{1,4}),([0-9a-f]{24})(,\d*)?", str(ask))
    if asked is None:
        raise ValueError("The other heads are asked for as 'layer,head,fingerprint'.")
    layer, head = int(asked[1]), int(asked[2])
    if not (0 <= layer < run.config.n_layers and 0 <= head < run.config.n_heads):
        raise ValueError(f"There is no layer {layer}, head {head} in this model.")
    return layer, head, asked[3]


def file_name(model: str, *parts) -> str:
    """A download's name from the model's name and what it shows: 'smollm2-135m-instruct-q4-1-layer18-
    head8-pipeline'. Letters, digits and dashes alone, so any file system takes it."""
    model = PurePath(model).name.rsplit(".gguf", 1)[0]  # a folder or file by its own name
    words = re.findall(r"[a-z0-9]+", " ".join([model, *map(str, parts)]).lower())
    return "-".join(words)[:120] or "attention-explorer"


def update_payload_bytes(
    run: Run, layer: int, head: int, style: figures.MapStyle = figures.MapStyle()
) -> int:
    """Bytes of the JSON a layer kept beside the one drawn costs, figures as the app sends them (softmax
    maps drawn in `style`): every head's pipeline while `heads_fit` (head `head`'s, carrying the
    others': `pipelines_payload`; past it, the head's alone), the RoPE rotation and score split, and
    `layer_figures` (all heads, head similarity, faithfulness). A head switch within it sends nothing:
    the page draws the head from this pack."""
    query, key = default_positions(run)
    every_head = pipeline_payload(run, layer, head, style, every_head=True)
    rope = [rope_rotation(run, layer, head, query, key), rope_score_split(run, layer, head, query, key)]
    sent = [every_head, *(plot_payload(fig) for fig in rope + layer_figures(run, layer, style))]
    return sum(len(json.dumps(each, ensure_ascii=False).encode()) for each in sent)


def pipelines_payload(shown: dict, others: dict[int, dict]) -> dict[str, str]:
    """Gradio's plot data of the shown head's figure (as `sent_figure` gives it), carrying each other
    head's (`others`, by head: `head_figure`) as a difference (`codec.differences`)."""
    heads = differences(shown, others)
    return marked(shown, heads=heads, head=heads.index(None))


def marked(shown: dict, **meta) -> dict[str, str]:
    """Gradio's plot data of a figure as sent, with `meta` added to its layout's meta (for the page)."""
    layout = shown["layout"] | {"meta": shown["layout"].get("meta", {}) | meta}
    return {"type": "plotly", "plot": figures.json_text(shown | {"layout": layout})}


def head_figure(shown: dict, parts: PipelineParts, filename: str) -> dict:
    """Another head's figure as sent, from the shown head's and the other's parts (its traces and
    title; every head's layout is alike): what `sent_figure` would give for it, without building its
    layout again. Its downloads are named `filename`."""
    options = shown["config"]["toImageButtonOptions"] | {"filename": filename}
    return {
        "data": figures.sendable_traces(parts.data),
        "layout": shown["layout"] | {"title": {"text": parts.title}},
        "config": shown["config"] | {"toImageButtonOptions": options},
    }

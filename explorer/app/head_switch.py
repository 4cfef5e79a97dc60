"""Every head's pipeline in one update, so that the page switches heads without asking the server.

The shown head's figure goes as the app sends any figure (`payload.plot_payload`: compact, packed, its
derived panels left for the page to rebuild). Each other head's goes as what differs from it: the traces
that differ, whole, and the layout's and config's keys that differ (its title, its downloads' name), in
`layout.meta.heads[h]` (None for the shown head). Arrays of those traces ride deflated (zlib, which the
page inflates with the browser's DecompressionStream): an update of every head of a 256-token layer in
8-bit codes stays under 1 MB. Rebuilt in the page, head h's figure is the one the server would send for
it, byte for byte, before the page's own rebuilding (explorer/app/ui/assets/page.js, `showHead`).
"""

from __future__ import annotations

from explorer.figures import PipelineParts, json_text, sendable_traces
from explorer.figures.codec import deflated


def pipelines_payload(shown: dict, others: dict[int, dict]) -> dict[str, str]:
    """Gradio's plot data of the shown head's figure (as `payload.sent_figure` gives it), carrying each
    other head's (`others`, by head: `head_figure`) as a difference."""
    heads = differences(shown, others)
    return marked(shown, heads=heads, head=heads.index(None))


def differences(shown: dict, others: dict[int, dict]) -> list[dict | None]:
    """Each head's figure as what differs from the shown head's, deflated (None for the shown head)."""
    heads = [None] * (len(others) + 1)
    for h, plot in others.items():
        heads[h] = deflated(difference(shown, plot))
    return heads


def marked(shown: dict, **meta) -> dict[str, str]:
    """Gradio's plot data of a figure as sent, with `meta` added to its layout's meta (for the page)."""
    layout = shown["layout"] | {"meta": shown["layout"].get("meta", {}) | meta}
    return {"type": "plotly", "plot": json_text(shown | {"layout": layout})}


def head_figure(shown: dict, parts: PipelineParts, filename: str) -> dict:
    """Another head's figure as sent, from the shown head's and the other's parts (its traces and
    title; every head's layout is alike): what `payload.sent_figure` would give for it, without
    building its layout again. Its downloads are named `filename`."""
    options = shown["config"]["toImageButtonOptions"] | {"filename": filename}
    return {
        "data": sendable_traces(parts.data),
        "layout": shown["layout"] | {"title": {"text": parts.title}},
        "config": shown["config"] | {"toImageButtonOptions": options},
    }


def difference(base: dict, other: dict) -> dict:
    """What turns figure `base` into `other` (both as sent): each trace that differs, whole, by its
    index; the layout's and config's top-level keys that differ (a key gone from `other` as None)."""
    if len(base["data"]) != len(other["data"]):
        raise ValueError("every head's pipeline has the same traces")
    data = {str(i): b for i, (a, b) in enumerate(zip(base["data"], other["data"], strict=True)) if a != b}
    return {"data": data, **{part: _keys(base[part], other[part]) for part in ("layout", "config")}}


def _keys(base: dict, other: dict) -> dict:
    changed = {key: value for key, value in other.items() if base.get(key) != value}
    return changed | {key: None for key in base.keys() - other.keys()}

"""The Overview tab's views: every layer and head scored on the prompt, and the next-token distribution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import figures
from explorer.engine import heads
from explorer.engine.run import Run
from explorer.engine.tokens import next_token_labels
from explorer.figures.plot import Plot
from explorer.views.attention import block_bytes
from explorer.views.labels import global_layers, kv_heads

TOP_NEXT_TOKENS = 10
TOP_HEADS = 5  # heads listed per score
# The lists beside the Overview: a score, what its top heads are, and whether the top is the highest.
TOP_HEAD_LISTS = {
    "previous_token": ("previous-token heads", True),
    "sink": ("sink heads", True),
    "induction": ("induction heads", True),
    "entropy": ("most focused (lowest entropy)", False),
    "distance": ("farthest reach (mean distance)", True),
}


@dataclass(frozen=True)
class TopHead:
    layer: int
    head: int
    kv_head: int
    score: float


def top_heads(
    profile: dict[str, np.ndarray], kv_head: np.ndarray, k: int = TOP_HEADS
) -> dict[str, list[TopHead]]:
    """Each score's `k` top heads (the highest, or for entropy the lowest), best first; a score with no
    value on this prompt (induction when no token repeats) lists none.  # profile {name: [L, H]}"""
    lists = {}
    for name, (_, highest) in TOP_HEAD_LISTS.items():
        scores = profile[name].astype(np.float64)  # [L, H]
        flat = np.where(np.isnan(scores), -np.inf if highest else np.inf, scores).ravel()
        order = np.argsort(-flat if highest else flat, kind="stable")[: min(k, np.isfinite(flat).sum())]
        layers, heads_ = np.divmod(order, scores.shape[1])
        lists[name] = [
            TopHead(int(layer), int(head), int(kv_head[head]), float(flat[i]))
            for i, layer, head in zip(order, layers, heads_, strict=True)
        ]
    return lists


def head_profile(run: Run) -> dict[str, np.ndarray]:
    """The overview's scores, every layer and head, computed layer by layer and a block of queries at a
    time, within the views' block budget.  # {name: [L, H]}"""
    return {name: scores.numpy() for name, scores in heads.prompt_profile(run, block_bytes()).items()}


def overview(run: Run, profile: dict[str, np.ndarray]) -> Plot:
    """The scores' grids; a model's global layers marked where the others slide over a window."""
    config = run.config
    return figures.profile_figure.plot(
        profile, kv_heads(config), global_layers(config), config.sliding_window or 0
    )


def head_lists(run: Run, profile: dict[str, np.ndarray]) -> dict[str, list[TopHead]]:
    """The top heads of each score on this run (`top_heads`)."""
    return top_heads(profile, kv_heads(run.config))


def next_tokens(run: Run) -> Plot:
    probs, ids = run.next_token_probs().topk(TOP_NEXT_TOKENS)
    tokens = next_token_labels(run.explorer.tokenizer, run.ids, ids.tolist())  # as read after the prompt
    return figures.next_tokens_figure.plot(list(zip(tokens, probs.tolist(), strict=True)))

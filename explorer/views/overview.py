"""The Overview tab's views: every layer and head scored on the prompt, and the next-token distribution."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer import figures
from explorer.engine import heads
from explorer.engine.run import Run
from explorer.engine.tokens import next_token_labels
from explorer.views.attention import block_bytes
from explorer.views.labels import kv_heads

TOP_NEXT_TOKENS = 10


def head_profile(run: Run) -> dict[str, np.ndarray]:
    """The overview's scores, every layer and head, computed layer by layer and a block of queries at a
    time, within the views' block budget.  # {name: [L, H]}"""
    return {name: scores.numpy() for name, scores in heads.prompt_profile(run, block_bytes()).items()}


def overview(run: Run, profile: dict[str, np.ndarray]) -> go.Figure:
    return figures.profile_figure(profile, kv_heads(run.config))


def next_tokens(run: Run) -> go.Figure:
    probs, ids = run.next_token_probs().topk(TOP_NEXT_TOKENS)
    tokens = next_token_labels(run.explorer.tokenizer, run.ids, ids.tolist())  # as read after the prompt
    return figures.next_tokens_figure(list(zip(tokens, probs.tolist(), strict=True)))

"""The Intervene tab's views: an ablated run beside the plain one, and a patching sweep."""

from __future__ import annotations

import plotly.graph_objects as go

from explorer import figures
from explorer.engine.interventions import PatchResult
from explorer.engine.run import Run
from explorer.engine.tokens import next_token_labels

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

"""The Intervene tab's views: an ablated run beside the plain one, and a patching sweep (its heatmap
for any metric, and its heads ranked)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from explorer import figures
from explorer.engine.interventions import PatchResult
from explorer.engine.run import Run
from explorer.engine.tokens import next_token_labels
from explorer.figures.common import quoted_token
from explorer.figures.plot import Plot

ABLATION_TOP_TOKENS = 8  # per run; the figure shows the union of both runs' top tokens
RANKED_HEADS = 10  # heads in a sweep's ranked table


def ablation_next_token_ids(plain: Run, ablated: Run, k: int = ABLATION_TOP_TOKENS) -> list[int]:
    """The k most likely next tokens of either run, most likely (in either) first."""
    if plain.ids != ablated.ids:
        raise ValueError("the plain and the ablated run must be of the same prompt")
    before, after = plain.next_token_probs(), ablated.next_token_probs()  # [vocab] each
    ids = set(before.topk(k).indices.tolist()) | set(after.topk(k).indices.tolist())
    return sorted(ids, key=lambda i: -max(float(before[i]), float(after[i])))


def ablation_next_tokens(plain: Run, ablated: Run, pair: tuple[int, int] | None = None) -> Plot:
    """The next token before and after the ablation, and what it did to logit(a) − logit(b) of `pair`
    (token ids; by default the plain run's two likeliest next tokens)."""
    ids = ablation_next_token_ids(plain, ablated)
    before, after = plain.next_token_probs()[ids], ablated.next_token_probs()[ids]  # [K] each
    last = (plain.logits[-1], ablated.logits[-1])  # [vocab] each
    a, b = pair if pair is not None else plain.next_token_probs().topk(2).indices.tolist()
    tokens = next_token_labels(plain.explorer.tokenizer, plain.ids, [*ids, a, b])  # as read after the prompt
    label = str(ablated.ablation or ablated.edits or "ablation of no head")
    diffs = [float(logits[a] - logits[b]) for logits in last]
    return figures.ablation_next_tokens_figure.plot(
        tokens[:-2],
        before.numpy(),
        after.numpy(),
        label,
        tuple(logits[ids].numpy() for logits in last),
        (tokens[-2], tokens[-1], *diffs),
    )


def knockout_summary(before: Run, after: Run, knocked) -> str:
    """What a knockout (`engine.edits.Knockout`) did to the run on screen, in a line: the next token and
    its probability before and after, and logit(a) − logit(b) of the two likeliest tokens before it."""
    p_before, p_after = before.next_token_probs(), after.next_token_probs()  # [vocab] each
    last = [run.logits_at(-1) for run in (before, after)]  # [vocab] each
    a, b = p_before.topk(2).indices.tolist()
    top = int(p_after.argmax())
    labels = next_token_labels(before.explorer.tokenizer, before.ids, [a, b, top])
    first, second, new = (quoted_token(label) for label in labels)
    was, now = f"{float(p_before[a]):.1%}", f"{float(p_after[a]):.1%}"
    if top == a:
        change = f"the next token stays {first} ({was} → {now})"
    else:
        change = f"the next token {first} ({was} → {now}) gives way to {new} ({float(p_after[top]):.1%})"
    diffs = [float(logits[a] - logits[b]) for logits in last]
    return (
        f"{str(knocked).capitalize()}: {change}; logit {first} − logit {second} {diffs[0]:+.3f} → "
        f"{diffs[1]:+.3f}. The maps show the knocked-out run."
    )


def patching(result: PatchResult, metric: str = "logit_diff") -> Plot:
    """Every head's recovered fraction of `metric` (one `result` reads: `result.readings`)."""
    reading = result.readings[metric]
    return figures.patching_figure.plot(
        reading.recovered.numpy(),
        reading.patched.numpy(),
        result.kv_head.numpy(),
        reading.clean,
        reading.corrupted,
        result.answer,
        result.distractor,
        metric,
    )


class RankedHead(NamedTuple):
    layer: int
    head: int
    kv_head: int
    recovered: float  # of the metric ranked by: negative where the patch moves it away from the clean run's
    direct: float  # the head's direct effect on logit(answer) − logit(distractor) in the clean run


def ranked_heads(
    result: PatchResult, direct: torch.Tensor, metric: str, k: int = RANKED_HEADS
) -> list[RankedHead]:
    """The k heads whose patch moves `metric` most either way (largest |recovered|, ties in layer and
    head order), each with its recovered fraction's sign and its direct effect: a head that pushes
    against the answer matters as much as one that carries it.  # direct [L, H] (the clean run's
    logit attribution)"""
    kv = result.kv_head.tolist()
    return [
        RankedHead(layer, head, kv[head], recovered, float(direct[layer, head]))
        for layer, head, recovered in result.top_heads(k, metric)
    ]


class TokenChange(NamedTuple):
    position: int
    clean: str  # the clean prompt's token there
    corrupted: str  # and the corrupted prompt's


def corruption(result: PatchResult) -> list[TokenChange]:
    """Where the corrupted prompt differs from the clean one, token by token: what the sweep asks
    (the names swapped everywhere, or one mention changed, ask different questions)."""
    pairs = zip(result.clean_tokens, result.corrupted_tokens, strict=True)
    return [TokenChange(i, str(a), str(b)) for i, (a, b) in enumerate(pairs) if a != b]

"""The Lens tab's views: the logit lens as positions × layers, a token's rank across layers, and the
direct logit attribution at one position (`explorer.engine.lens` computes, `explorer.figures.lens` draws)."""

from __future__ import annotations

from explorer.engine.attention import kv_head_map
from explorer.engine.lens import resolve_token, token_across_layers
from explorer.engine.run import Run
from explorer.engine.tokens import next_token_labels
from explorer.figures.lens import attention_to_figure, attribution_figure, lens_figure, rank_figure
from explorer.figures.plot import Plot
from explorer.views.labels import clamp_position

LENS_WINDOW = 128  # positions the grid shows at once; past it, a window the page moves


def lens_window(run: Run, start: int) -> list[int]:
    """The positions of the window that starts at `start` (clamped so it is full when it can be)."""
    start = max(0, min(start, run.n_tokens - LENS_WINDOW))
    return list(range(start, min(run.n_tokens, start + LENS_WINDOW)))


def default_target(run: Run, position: int = -1) -> int:
    """The model's own prediction at `position`: the token the rank line follows when none is typed."""
    return int(run.logits_at(position).argmax())


def lens_grid(run: Run, start: int = 0) -> Plot:
    """The lens' grid over the window of positions from `start`: each cell its top-1 token."""
    positions = lens_window(run, start)
    read = run.logit_lens(positions=positions, top_k=5)
    top_tokens = top_token_labels(run, read.positions, read.top_ids.tolist())
    return lens_figure.plot(
        run.tokens, read.positions, top_tokens, read.top_probs.numpy(), read.kl_to_final.numpy()
    )


def top_token_labels(run: Run, positions: list[int], top_ids: list) -> list[list[list[str]]]:
    """The lens' top tokens as the cells and hover name them: each decoded once, and one holding part of
    a character labelled by what it would read after the tokens at its position (`next_token_labels`:
    "é¹", not U+FFFD).  # top_ids [L+1][P][k] -> the same, as labels"""
    tokenizer, decoded = run.explorer.tokenizer, {}

    def label(position: int, token_id: int) -> str:
        if token_id not in decoded:
            decoded[token_id] = tokenizer.decode([token_id], skip_special_tokens=False)
        if "\ufffd" not in decoded[token_id]:
            return decoded[token_id]
        return next_token_labels(tokenizer, run.ids[: position + 1], [token_id])[0]

    return [
        [[label(p, i) for i in row] for p, row in zip(positions, layer, strict=True)] for layer in top_ids
    ]


def target_rank(run: Run, target: str | int | None = None, position: int = -1) -> Plot:
    """`target` (its text, a single token of the vocabulary, or its id; None or '': the model's own
    prediction at `position`)'s rank and probability after every block at `position`."""
    position = clamp_position(run, position % run.n_tokens)
    chosen = target not in (None, "")
    target_id = resolve_token(run, target, "target") if chosen else default_target(run, position)
    ranks, probs = token_across_layers(run, target_id, position)
    label = next_token_labels(run.explorer.tokenizer, run.ids[: position + 1], [target_id])[0]
    at = (position, run.tokens[position])
    return rank_figure.plot(label, ranks.numpy(), probs.numpy(), at, chosen)


def attribution(run: Run, answer: str | int, distractor: str | int | None = None, position: int = -1) -> Plot:
    """Who writes logit(answer) (− logit(distractor)) at `position`: every head, MLP and the embedding."""
    a = run.logit_attribution(answer, None if distractor in (None, "") else distractor, position)
    c = run.config
    tokenizer, context = run.explorer.tokenizer, run.ids[: a.position + 1]
    answer_label, *rest = next_token_labels(
        tokenizer, context, [a.answer_id, *([] if a.distractor_id is None else [a.distractor_id])]
    )
    kv_head = kv_head_map(c.n_heads, c.n_kv_heads).numpy()
    return attribution_figure.plot(
        a.heads.numpy(),
        a.mlps.numpy(),
        a.biases.numpy(),
        a.embedding,
        a.total,
        kv_head,
        (answer_label, rest[0] if rest else None, a.position),
    )


def heads_looking_at(run: Run, key: int, query: int = -1) -> Plot:
    """Which heads look at `key` from `query`: every head's attention weight, layers × heads."""
    key, query = clamp_position(run, key % run.n_tokens), clamp_position(run, query % run.n_tokens)
    weights = run.attention_to(key, query)
    kv_head = kv_head_map(run.config.n_heads, run.config.n_kv_heads).numpy()
    return attention_to_figure.plot(
        weights.numpy(), kv_head, (key, run.tokens[key]), (query, run.tokens[query])
    )

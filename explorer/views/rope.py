"""The RoPE tab's views: the model's angles and wavelengths, and one query and key turned pair by pair."""

from __future__ import annotations

import torch

from explorer import figures
from explorer.engine import rope
from explorer.engine.run import Run
from explorer.figures.plot import Plot
from explorer.views.labels import clamp_position


def default_positions(run: Run) -> tuple[int, int]:
    """The RoPE view's query and key at first: the last token and the one before it."""
    return run.n_tokens - 1, max(run.n_tokens - 2, 0)


def rope_angles(run: Run) -> Plot:
    inv_freq = rope.config_inverse_frequencies(run.config)  # [d/2]
    angles = rope.angles(torch.arange(run.n_tokens), inv_freq)  # [N, d/2]
    return figures.rope_angles_figure.plot(run.tokens, angles.numpy(), inv_freq.float().numpy())


def rope_wavelengths(run: Run) -> Plot:
    """The wavelengths of the model's RoPE, and of its sliding layers' own base where it has one."""
    config = run.config
    wavelengths = rope.wavelengths(rope.config_inverse_frequencies(config))  # [d/2]
    local = rope.sliding_inverse_frequencies(config)
    sliding = None
    if local is not None:
        sliding = (rope.wavelengths(local).numpy(), config.sliding_rope_theta, config.rope_theta)
    return figures.wavelengths_figure.plot(wavelengths.numpy(), config.context_length, run.n_tokens, sliding)


def _query_and_key(run: Run, layer: int, head: int, query: int, key: int):
    """The head's q at `query` and its kv head's k at `key`, as pairs before and after RoPE.
    # each [d/2, 2]"""
    p = run.projections(layer)
    kv = int(p.kv_head[head])
    q, q_rot = rope.pairs(p.q_unrotated[head, query]), rope.pairs(p.q_rot[head, query])
    k, k_rot = rope.pairs(p.k_unrotated[kv, key]), rope.pairs(p.k_rot[kv, key])
    return q, q_rot, k, k_rot


def rope_rotation(run: Run, layer: int, head: int, query: int, key: int) -> Plot:
    query, key = clamp_position(run, query), clamp_position(run, key)
    q, q_rot, k, k_rot = (t.numpy() for t in _query_and_key(run, layer, head, query, key))
    return figures.rotation_figure.plot(
        q, q_rot, k, k_rot, (query, run.tokens[query]), (key, run.tokens[key])
    )


def rope_score_split(run: Run, layer: int, head: int, query: int, key: int) -> Plot:
    query, key = clamp_position(run, query), clamp_position(run, key)
    q, q_rot, k, k_rot = _query_and_key(run, layer, head, query, key)
    with_rope = (q_rot * k_rot).sum(-1)  # [d/2], sums to scores[head, query, key]
    without_rope = (q * k).sum(-1)  # [d/2]
    wavelengths = rope.wavelengths(run.projections(layer).inv_freq)
    return figures.score_split_figure.plot(
        with_rope.numpy(),
        without_rope.numpy(),
        wavelengths.numpy(),
        (query, run.tokens[query]),
        (key, run.tokens[key]),
    )

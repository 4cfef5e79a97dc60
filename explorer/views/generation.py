"""The Generate tab's views: a Generation's steps as the tab shows them, from the rows each step already
holds (`explorer.engine.generate`). Nothing here runs the model."""

from __future__ import annotations

import numpy as np

from explorer import figures
from explorer.engine.generate import Generation, Step
from explorer.figures.plot import Plot
from explorer.views.gqa import kv_cache
from explorer.views.labels import head_name, layer_title


def _check_step_view(generation: Generation, layer: int, head: int) -> None:
    config = generation.config
    if not isinstance(layer, int) or not 0 <= layer < config.n_layers:
        raise ValueError(f"layer must be an integer in [0, {config.n_layers - 1}], got {layer!r}")
    if not isinstance(head, int) or not 0 <= head < config.n_heads:
        raise ValueError(f"head must be an integer in [0, {config.n_heads - 1}], got {head!r}")
    if not generation.steps:
        raise ValueError("Nothing has been generated yet.")


def clamp_steps(generation: Generation, n_steps: int | float | None) -> int:
    """The step slider's value as a count of steps shown: 1..steps so far (None: all)."""
    taken = len(generation.steps)
    return taken if n_steps is None else int(min(max(int(n_steps), 1), taken))


def generation_rows(generation: Generation, layer: int, head: int, n_steps: int | None = None) -> np.ndarray:
    """The head's row of each of the first `n_steps` steps over every position so far, NaN after each
    row's query.  # [S, len(ids)] float32"""
    _check_step_view(generation, layer, head)
    steps = generation.steps[: clamp_steps(generation, n_steps)]
    rows = np.full((len(steps), len(generation.ids)), np.nan, dtype=np.float32)
    for k, step in enumerate(steps):
        rows[k, : step.position + 1] = step.attention[layer, head].numpy()
    return rows


def generation_map(generation: Generation, layer: int, head: int, n_steps: int | None = None) -> Plot:
    """The heatmap of the new tokens' rows for one layer and head; `n_steps` looks back to an earlier step."""
    rows = generation_rows(generation, layer, head, n_steps)
    named = f"{layer_title(generation.config, layer)} · {head_name(generation.config, head)}"
    title = f"{named}: each new token's attention over the context"
    return figures.generation_figure.plot(generation.tokens, rows, generation.n_prompt, title)


def step_candidates(step: Step) -> Plot:
    """The step's candidates with the token it chose marked; a sampled token outside them is added last."""
    top = [(c.token, c.probability) for c in step.candidates]
    ids = [c.id for c in step.candidates]
    if step.id not in ids:
        top.append((step.token, step.probability))
        ids.append(step.id)
    title = f"Step {step.index}: the candidates after position {step.position}"
    return figures.candidates_figure.plot(top, ids.index(step.id), title)


def generation_kv_cache(generation: Generation, n_steps: int | None = None) -> Plot:
    """The KV-cache figure with the generation's cache as it stands: its actual bytes at its length; with
    `n_steps`, as it stood when the last of them was taken (its query's position the last cached)."""
    cache = generation.cache
    length = cache.length
    if n_steps is not None and generation.steps:
        length = generation.steps[clamp_steps(generation, n_steps) - 1].position + 1
    return kv_cache(generation.config, cache.k.element_size(), (length, cache.used_nbytes(length)))


def generated_text(generation: Generation) -> str:
    """The new tokens as text, special tokens written out (a character still incomplete shows as �)."""
    return generation.explorer.tokenizer.decode(
        generation.ids[generation.n_prompt :], skip_special_tokens=False
    )

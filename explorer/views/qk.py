"""Why a head looks there (`explorer.engine.qk`, `explorer.engine.composition`): a score's table of
sources, a row's key drivers and the composition of every pair of heads, reduced to what a figure shows
and handed to `explorer.figures.qk`. The sources that matter most are shown by name, the rest summed into
"other", so the parts shown still sum to the score."""

from __future__ import annotations

import numpy as np
import torch

from explorer.figures import qk as figures
from explorer.figures.plot import Plot
from explorer.views.labels import clamp_position

TOP_SOURCES = 8  # sources named on each side of a table; the rest are summed into "other"
TOP_DRIVERS = 10  # key-side sources named in a row's drivers


def source_label(source: tuple, side: str = "key") -> str:
    """A source as a figure names it: "head 16.0", "MLP 3", "o_proj bias 3", "embedding", "b_Q"/"b_K"."""
    kind, layer, head = source
    if kind == "head":
        return f"head {layer}.{head}"
    if kind == "mlp":
        return f"MLP {layer}"
    if kind == "o_bias":
        return f"o_proj bias {layer}"
    if kind == "bias":
        return "b_Q" if side == "query" else "b_K"
    return kind


def top_and_rest(weights: torch.Tensor, count: int) -> tuple[list[int], list[int]]:
    """The indices of the `count` largest |weights|, in source order, and the others."""
    if len(weights) <= count + 1:
        return list(range(len(weights))), []
    kept = sorted(weights.abs().topk(count).indices.tolist())
    rest = sorted(set(range(len(weights))) - set(kept))
    return kept, rest


def _side(sources: list, kept: list[int], rest: list[int], side: str) -> tuple[list[str], np.ndarray]:
    """The labels of the kept sources (and "other") and their heads as [layer, head] (−1: not a head)."""
    labels = [source_label(sources[i], side) for i in kept]
    heads = [[s[1], s[2]] if s[0] == "head" else [-1, -1] for s in (sources[i] for i in kept)]
    if rest:
        labels.append(f"other ({len(rest)})")
        heads.append([-1, -1])
    return labels, np.array(heads, dtype=np.int64).reshape(-1, 2)


def _gathered(values: torch.Tensor, kept: list[int], rest: list[int], dim: int) -> torch.Tensor:
    """The kept rows (or columns) of `values`, then the sum of the rest as one more."""
    parts = [values.index_select(dim, torch.tensor(kept, dtype=torch.long))]
    if rest:
        parts.append(values.index_select(dim, torch.tensor(rest, dtype=torch.long)).sum(dim, keepdim=True))
    return torch.cat(parts, dim)


def why_score(
    run, layer: int, head: int, query: int, key: int, top: int = TOP_SOURCES, attribution=None
) -> Plot:
    """One head's score of `query` for `key` split into its sources: the `top` query-side and key-side
    sources with the largest parts, the rest as "other" (`attribution`, else `run.score_attribution`)."""
    query, key = clamp_position(run, query), clamp_position(run, key)
    a = attribution or run.score_attribution(layer, head, query, key)
    q_kept, q_rest = top_and_rest(a.table.sum(1), top)
    k_kept, k_rest = top_and_rest(a.table.sum(0), top)
    table = _gathered(_gathered(a.table, q_kept, q_rest, 0), k_kept, k_rest, 1)
    q_labels, q_heads = _side(a.query_sources, q_kept, q_rest, "query")
    k_labels, k_heads = _side(a.key_sources, k_kept, k_rest, "key")
    where = dict(layer=layer, head=head, query=(query, run.tokens[query]), key=(key, run.tokens[key]))
    return figures.score_split_figure.plot(
        table.numpy(), q_labels, k_labels, q_heads, k_heads, a.score, where
    )


def what_drives_row(run, layer: int, head: int, query: int, top: int = TOP_DRIVERS) -> Plot:
    """Each key-side source's part of `query`'s score at every key: the `top` sources whose parts are
    largest over the row, the rest as "other" (`run.key_drivers`)."""
    query = clamp_position(run, query)
    d = run.key_drivers(layer, head, query)
    kept, rest = top_and_rest(d.parts.abs().sum(1), top)
    parts = _gathered(d.parts, kept, rest, 0)
    labels, heads = _side(d.sources, kept, rest, "key")
    where = dict(layer=layer, head=head, query=(query, run.tokens[query]))
    return figures.key_drivers_figure.plot(parts.numpy(), labels, heads, d.scores.numpy(), run.tokens, where)


def composition(explorer, picked: tuple[int, int] | None = None) -> Plot:
    """K-, Q- and V-composition of every earlier head into every later one (`ex.composition_scores`),
    the picked head's row and column framed."""
    c, config = explorer.composition_scores(), explorer.config
    n = config.n_layers * config.n_heads
    scores = {kind: getattr(c, kind).reshape(n, n).numpy() for kind in ("k", "q", "v")}
    return figures.composition_figure.plot(scores, config.n_layers, config.n_heads, picked)


def testable_sources(a, top: int = TOP_SOURCES) -> list:
    """A split's (`run.score_attribution`) `top` sources on each side by |part|, largest first, as
    (label, value) choices for `source_test`: the value names the side and the source ("key head 16 0",
    "query embedding")."""
    choices = []
    for side, parts, names in (
        ("key", a.table.sum(0), a.key_sources),
        ("query", a.table.sum(1), a.query_sources),
    ):
        for i in parts.abs().argsort(descending=True, stable=True)[:top].tolist():
            value = " ".join(str(part) for part in (side, *names[i]) if part is not None)
            label = f"{source_label(names[i], side)}, {side} side ({float(parts[i]):+.3g})"
            choices.append((label, value))
    return choices


def source_test(run, layer: int, head: int, query: int, key: int, choice: str, mode: str) -> str:
    """One source of the split removed from its side (`run.source_effect`): the real change of the
    score and the attention weight beside the split's linear prediction, as a line of plain text."""
    side, *named = str(choice).split() or [""]
    if side not in ("key", "query") or not named:
        raise ValueError(f"pick a source of the split to test, got {str(choice)[:40]!r}")
    try:
        source = (named[0], *(int(part) for part in named[1:]))
    except ValueError:
        raise ValueError(f"there is no source {' '.join(named)[:40]!r}") from None
    e = run.source_effect(layer, head, query, key, source, side, mode)
    removed = "zeroed" if mode == "zero" else "replaced by its mean over the prompt"
    at = query if side == "query" else key
    return (
        f"{source_label(e.source, side)}'s write at the {side} (position {at}) {removed}: score "
        f"{e.score:.3g} → {e.changed_score:.3g} (the split predicted {e.predicted_score:.3g}); "
        f"attention weight {e.weight:.3g} → {e.changed_weight:.3g} (predicted {e.predicted_weight:.3g})."
    )

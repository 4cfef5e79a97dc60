"""What actually moves through the stream: each part's share of what a block adds (Ferrando & Voita 2024,
"Information flow routes"; the LLM Transparency Tool's `routes/contributions.py`), the graph of the
routes that carry a prediction, and attention rollout (Abnar & Zuidema 2020) to set beside it.

- The stream after attention at position i is the block's input there plus every head's part from
  every key j ≤ i: α[h,i,j] · v[g(h),j] · W_O[h] (o_proj's bias, where a model has one, is in the whole
  but no part). Keys after i are not parts. A part's proximity to the whole y is
  max(‖y‖₁ − ‖y − part‖₁, 1e-5); its share is its proximity over all the parts'. The MLP step is the
  same with {MLP output, stream after attention} -> block output.
- Each block is entered again from the run's cached input with taps on the one forward, which read the
  stream after attention, the MLP output and the block output; the weights α come from the layer's
  projections. The parts' L1 distances need v·W_O per head and key, [H, N, hidden], never
  [H, N, N, hidden]: queries are taken a few at a time.
- The graph (as the tool builds it): at every step, shares under the threshold are dropped and the rest
  renormalised; walking back from the output at one position, an edge is kept where its weight passes
  the threshold, and only the positions it reaches are computed below it.
- Rollout propagates one row through Â_l = ½·mean_h A_l + ½·I, from the last layer down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from explorer.engine import deadline, working_memory
from explorer.engine.attention import Projections
from explorer.engine.lens import check_position
from explorer.engine.taps import Taps, tapped

PROXIMITY_FLOOR = 1e-5  # the tool's: a part pointing away from the whole still counts this much
DISTANCE_BLOCK_BYTES = 32 * 2**20  # [queries, H, keys, hidden] float32 held at once


def shares(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """Each part's share of `whole`: max(‖y‖₁ − ‖y − part‖₁, 1e-5) over the sum of all of them.
    # parts [..., P, hidden], whole [..., hidden] -> [..., P], summing to 1 over P"""
    proximity = _proximity(whole.abs().sum(-1, keepdim=True), (whole[..., None, :] - parts).abs().sum(-1))
    return proximity / proximity.sum(-1, keepdim=True)


def _proximity(whole_norm: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
    return (whole_norm - distance).clamp_min(PROXIMITY_FLOOR)


@dataclass(frozen=True, eq=False)
class Contributions:
    """What makes up the stream at one position of one layer, as shares."""

    layer: int
    position: int
    heads: torch.Tensor  # [H, N] each (head, key) part's share of the stream after attention; 0 after
    residual: float  # the block input's share there: heads.sum() + residual == 1
    mlp: float  # the MLP output's share of the block output
    mlp_residual: float  # the stream after attention's share of it: mlp + mlp_residual == 1


class Edge(NamedTuple):
    """One route of the graph. At `layer`, "attention" (from_token's stream entering the block, through
    the heads, to to_token's stream after attention) and "residual" (i -> i, the block input kept) end
    after attention; "mlp" and "mlp_residual" (i -> i) go from there to the block's output."""

    layer: int
    from_token: int
    to_token: int
    weight: float
    kind: str
    heads: tuple[tuple[int, float], ...] = ()  # attention: each head's share, largest first


@dataclass(frozen=True, eq=False)
class InformationFlow:
    """The routes that carry the stream at `position` after the last block, down to the embeddings."""

    position: int
    threshold: float
    edges: list[Edge]  # every edge at or above the threshold, reachable from the output at `position`
    n_layers: int


@dataclass(frozen=True, eq=False)
class _Layer:
    """What one layer's shares are computed from, at positions 0..m−1 (float32, CPU)."""

    block_input: torch.Tensor  # [m, hidden]
    after_attention: torch.Tensor  # [m, hidden]
    mlp_output: torch.Tensor  # [m, hidden]
    block_output: torch.Tensor  # [m, hidden]
    writes: torch.Tensor  # [H, m, hidden] v[g(h), j] · W_O[h]: what key j writes through head h
    # [rows, hidden] what the norm after attention multiplies each query's parts by, frozen at its real
    # output's RMS (Gemma; None: no such norm, the parts are written as they are)
    write_scales: torch.Tensor | None = None


def _check_plain_heads(run) -> None:
    if run.ablation is not None and run.ablation.mode == "mean":
        raise ValueError(
            "Contributions split each head's output by key; a mean-ablated head writes its average over "
            "every position instead, which no key up to the query makes. Use zero ablation, or no ablation."
        )


@torch.inference_mode()
def _layer(run, p: Projections, m: int, last_only: bool = False) -> _Layer:
    """Block `p.layer` entered again from its cached input over positions 0..m−1 (`last_only`: from the
    stream after attention on, position m−1 alone), read by taps; and what each key writes per head,
    from the layer's projections `p`."""
    model, layer = run.explorer.model, p.layer
    read: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def tap(_layer: int, value: torch.Tensor) -> None:  # [1, rows, hidden]
            read[name] = value[0].float().cpu()

        return tap

    def keep_write_scales(_layer: int, value: torch.Tensor) -> None:  # [1, rows, hidden] o_proj's output
        scales = model.layers[layer].attention_write_scale(value[0])
        read["write_scales"] = None if scales is None else scales.cpu()

    taps = run.taps.then(  # its edits and ablation, as its forward applied them; then the readers
        Taps(
            attention_output=keep_write_scales,
            after_attention=keep("after_attention"),
            mlp_output=keep("mlp_output"),
            block_output=keep("block_output"),
        )
    )
    stream = run.layer_inputs[layer, None, :m]  # [1, m, hidden]
    model.hidden_states(stream=stream, layers=range(layer, layer + 1), taps=taps, last_only=last_only)
    attn = model.layers[layer].self_attn
    w_o = (
        attn.o_proj.weight.float().cpu().view(-1, attn.n_heads, attn.head_dim).transpose(0, 1)
    )  # [H, hidden, d]
    writes = p.v[p.kv_head, :m] @ w_o.transpose(1, 2)  # [H, m, d] @ [H, d, hidden] -> [H, m, hidden]
    first = m - 1 if last_only else 0
    block_input = run.layer_inputs[layer, first:m].float().cpu()
    return _Layer(block_input=block_input, writes=writes, **read)


def _weights(run, p: Projections, queries: list[int], m: int) -> torch.Tensor:
    """The attention weights of `queries` over keys 0..m−1, as the run's heads apply them (a
    zero-ablated head's are 0).  # -> [Q, H, m]"""
    alpha = p.rows(queries, n_keys=m).probs  # [H, Q, m]
    alpha = tapped(run.heads_tap, p.layer, alpha[None])[0]  # [H, Q, m]
    return alpha.transpose(0, 1)


def attention_parts(alpha: torch.Tensor, writes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """What each head wrote from each key into the stream at each query: α · v·W_O, times the frozen
    scale of the norm after attention where the model has one.
    # alpha [q, H, keys], writes [H, keys, hidden], scales [q, hidden] -> [q, H, keys, hidden]"""
    parts = alpha[..., None] * writes[None]
    return parts if scales is None else parts.mul_(scales[:, None, None])


def _attention_shares(
    alpha: torch.Tensor,
    writes: torch.Tensor,
    whole: torch.Tensor,
    residual: torch.Tensor,
    queries: list[int],
    scales: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shares of every (head, key ≤ query) part and of the block input in the stream after attention at
    each query, a few queries at a time.  # alpha [Q, H, m], writes [H, m, hidden], whole and residual
    [Q, hidden], scales [Q, hidden] (`attention_parts`) -> heads [Q, H, m] (0 for keys after the query),
    residual [Q]"""
    n_heads, m, hidden = writes.shape
    whole_norm = whole.abs().sum(-1)  # [Q]
    proximity = torch.zeros_like(alpha)
    per_query = 4 * n_heads * m * hidden
    step = max(1, DISTANCE_BLOCK_BYTES // per_query)
    for first in range(0, len(queries), step):
        deadline.check()
        chunk = slice(first, first + step)
        keys = max(queries[chunk]) + 1
        chunk_scales = None if scales is None else scales[chunk]
        parts = attention_parts(
            alpha[chunk, :, :keys], writes[:, :keys], chunk_scales
        )  # [q, H, keys, hidden]
        distance = parts.sub_(whole[chunk, None, None]).abs_().sum(-1)  # [q, H, keys]
        proximity[chunk, :, :keys] = _proximity(whole_norm[chunk, None, None], distance)
    positions = torch.arange(m)[None, None, :]
    proximity.masked_fill_(positions > torch.tensor(queries)[:, None, None], 0.0)  # not parts
    own = _proximity(whole_norm, (whole - residual).abs().sum(-1))  # [Q]
    total = proximity.sum((1, 2)) + own
    return proximity / total[:, None, None], own / total


@torch.inference_mode()
def contributions(run, layer: int, position: int = -1) -> Contributions:
    """Every part's share of the stream at `position` after `layer`'s attention and after its MLP."""
    _check_plain_heads(run)
    run._check_layer(layer)
    position = check_position(run, position)
    m = position + 1
    p = run.projections(layer, remember=False)  # the layer's q, k, v: computed once, read twice
    at = _layer(run, p, m, last_only=True)  # streams at `position` alone
    alpha = _weights(run, p, [position], m)  # [1, H, m]
    heads, residual = _attention_shares(
        alpha, at.writes, at.after_attention, at.block_input, [position], at.write_scales
    )
    mlp = shares(torch.stack([at.mlp_output[0], at.after_attention[0]]), at.block_output[0])
    padded = torch.zeros(run.config.n_heads, run.n_tokens)
    padded[:, :m] = heads[0]
    return Contributions(
        layer=layer,
        position=position,
        heads=padded,
        residual=float(residual[0]),
        mlp=float(mlp[0]),
        mlp_residual=float(mlp[1]),
    )


def renormalise(
    parts: torch.Tensor, rest: torch.Tensor, threshold: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shares under `threshold` dropped and the others renormalised to sum to 1, as the tool's graphs do.
    # parts [Q, ...], rest [Q] -> same"""
    parts = parts * (parts > threshold)
    rest = rest * (rest > threshold)
    total = rest + parts.flatten(1).sum(-1)
    scale = torch.where(total > 0, 1 / total.clamp_min(1e-30), torch.zeros_like(total))
    return parts * scale.view(-1, *(1,) * (parts.dim() - 1)), rest * scale


@torch.inference_mode()
def information_flow(run, position: int = -1, threshold: float = 0.04) -> InformationFlow:
    """The routes reaching the stream at `position` after the last block, walked back layer by layer."""
    _check_plain_heads(run)
    position = check_position(run, position)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold < 1:
        raise ValueError(f"threshold must be a number in [0, 1), got {threshold!r}")
    edges: list[Edge] = []
    reached = [position]  # positions whose block output is on a route
    for layer in deadline.steps(reversed(range(run.config.n_layers))):
        working_memory.need(_shares_bytes(run.config, len(reached), max(reached) + 1))
        p = run.projections(layer, remember=False)
        at = _layer(run, p, max(reached) + 1)
        whole = at.block_output[reached]
        step = shares(torch.stack([at.mlp_output[reached], at.after_attention[reached]], 1), whole)
        mlp, kept = renormalise(step[:, :1], step[:, 1], threshold)
        after_attention = []
        for i, through, around in zip(reached, mlp[:, 0].tolist(), kept.tolist(), strict=True):
            edges += [
                Edge(layer, i, i, w, kind)
                for w, kind in ((through, "mlp"), (around, "mlp_residual"))
                if w > threshold
            ]
            if max(through, around) > threshold:
                after_attention.append(i)
        if not after_attention:
            break
        alpha = _weights(run, p, after_attention, max(after_attention) + 1)
        heads, residual = _attention_shares(
            alpha,
            at.writes[:, : alpha.shape[-1]],
            at.after_attention[after_attention],
            at.block_input[after_attention],
            after_attention,
            None if at.write_scales is None else at.write_scales[after_attention],
        )
        heads, residual = renormalise(heads, residual, threshold)
        sources = set()
        for q, i in enumerate(after_attention):
            by_key = heads[q].sum(0)  # [m]
            for j in torch.nonzero(by_key > threshold).flatten().tolist():
                column = heads[q, :, j]
                listed = sorted(
                    ((h, float(w)) for h, w in enumerate(column.tolist()) if w > 0), key=lambda x: -x[1]
                )
                edges.append(Edge(layer, j, i, float(by_key[j]), "attention", tuple(listed)))
                sources.add(j)
            if residual[q] > threshold:
                edges.append(Edge(layer, i, i, float(residual[q]), "residual"))
                sources.add(i)
        reached = sorted(sources)
        if not reached:
            break
    return InformationFlow(position=position, threshold=threshold, edges=edges, n_layers=run.config.n_layers)


def _shares_bytes(config, queries: int, keys: int) -> int:
    """What one layer of the graph holds at most, `queries` positions reached over `keys`: their weights,
    proximities, shares and renormalised copies ([Q, H, keys] six times), what each key writes
    ([H, keys, hidden]), the streams at the keys, and one block of parts."""
    heads, hidden = config.n_heads, config.hidden_size
    return 4 * (6 * queries * heads * keys + heads * keys * hidden + 4 * keys * hidden) + DISTANCE_BLOCK_BYTES


@torch.inference_mode()
def rollout(run, position: int = -1) -> torch.Tensor:
    """Row `position` of Â_{L−1} ⋯ Â_0, Â_l = ½·mean_h A_l + ½·I: one row carried down, a block of
    queries' maps at a time.  # -> [N] float32 CPU, summing to 1"""
    position = check_position(run, position)
    m = position + 1
    row = torch.zeros(m)
    row[position] = 1.0
    block = max(1, DISTANCE_BLOCK_BYTES // (4 * run.config.n_heads * m))
    for layer in deadline.steps(reversed(range(run.config.n_layers))):
        p = run.projections(layer, remember=False)
        mixed = torch.zeros(m)
        for start in range(0, m, block):
            stop = min(m, start + block)
            probs = p.rows(range(start, stop), n_keys=stop).probs.mean(0)  # [b, stop]
            mixed[:stop] += row[start:stop] @ probs
        row = 0.5 * mixed + 0.5 * row
    out = torch.zeros(run.n_tokens)
    out[:m] = row
    return out

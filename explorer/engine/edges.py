"""Edges between the components that write the stream and the inputs that read it: scored by edge
attribution patching with integrated gradients (EAP-IG, Hanna et al. 2024), and a circuit of kept edges
measured exactly. GQA-native: a kv head's k and v inputs are one downstream node each, read by its
group of query heads.

The stream entering a block is the sum of what was written into it (`explorer.engine.qk`'s split):
  upstream    ("embedding",), ("head", l, h): z_h · W_O[h] (Gemma: through the norm after attention, its
              scale frozen at the run's own output, so the heads' parts sum to what the norm writes),
              ("mlp", l): what the MLP writes. An o_proj bias is the same in every run: no node.
  downstream  ("q", l, h), ("k", l, kv), ("v", l, kv): what that projection reads (before the input norm),
              ("mlp", l): what the MLP reads, ("logits",): what the final norm reads.
An edge u → v exists where u writes before v reads: heads and MLPs of earlier layers (and the embedding)
into a block's q/k/v; those and the block's own heads into its MLP; everything into the logits.

- `engine.exact_circuits` measures a circuit of kept edges exactly (`circuit_metric`).
- `edge_attribution`: score(u → v) = (clean write of u − corrupted write of u) · mean over α = k/steps,
  k = 1..steps, of ∂M/∂(input of v), M the metric summed over the pairs, at the run whose embedding is
  corrupted + α (clean − corrupted); averaged over the pairs. The gradients come from one forward and
  backward per step, through zero leaves the taps add to q/k/v's outputs, the MLP's input and the final
  norm's input; a q/k/v head's gradient is carried back to its own input through the input norm.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from functools import cached_property

import torch

from explorer.engine import deadline, pairs
from explorer.engine.nodes import Trace, trace
from explorer.engine.taps import Taps

Upstream = tuple
Downstream = tuple


def upstream_nodes(config) -> list[Upstream]:
    """Every writer, in the order of the stream: the embedding, then each layer's heads and MLP."""
    found: list[Upstream] = [("embedding",)]
    for layer in range(config.n_layers):
        found += [("head", layer, h) for h in range(config.n_heads)] + [("mlp", layer)]
    return found


def downstream_nodes(config) -> list[Downstream]:
    """Every reader, in the order of the forward: each layer's q heads, k and v kv heads, MLP; the logits."""
    found: list[Downstream] = []
    for layer in range(config.n_layers):
        found += [("q", layer, h) for h in range(config.n_heads)]
        found += [(kind, layer, kv) for kind in ("k", "v") for kv in range(config.n_kv_heads)]
        found.append(("mlp", layer))
    return [*found, ("logits",)]


def written_before(config, layer: int, mlp: bool = False) -> int:
    """How many upstream nodes write before `layer`'s attention reads (its MLP, with `mlp`)."""
    return 1 + layer * (config.n_heads + 1) + (config.n_heads if mlp else 0)


def readers_per_layer(config) -> int:
    """Downstream nodes of one layer: H q heads, H_kv k and H_kv v heads, the MLP."""
    return config.n_heads + 2 * config.n_kv_heads + 1


def valid_edges(config) -> torch.Tensor:
    """Which (upstream, downstream) pairs are edges.  # [U, V] bool"""
    ups, downs = len(upstream_nodes(config)), len(downstream_nodes(config))
    valid = torch.zeros(ups, downs, dtype=torch.bool)
    per = readers_per_layer(config)
    for layer in range(config.n_layers):
        valid[: written_before(config, layer), layer * per : (layer + 1) * per - 1] = True
        valid[: written_before(config, layer, mlp=True), (layer + 1) * per - 1] = True
    valid[:, -1] = True
    return valid


def every_edge(config) -> list[tuple[Upstream, Downstream]]:
    """Every valid edge as (upstream, downstream), writers in the stream's order."""
    up, down = upstream_nodes(config), downstream_nodes(config)
    u, v = valid_edges(config).nonzero(as_tuple=True)
    return [(up[a], down[b]) for a, b in zip(u.tolist(), v.tolist(), strict=True)]


def valid_positional(config, n_tokens: int) -> torch.Tensor:
    """Which (upstream, downstream, position) are positional edges: a writer at p into a reader at p,
    where the model reads the logits at the last position only.  # [U, V, N] bool"""
    valid = valid_edges(config)[..., None].repeat(1, 1, n_tokens)
    valid[:, -1, :-1] = False
    return valid


@dataclass(frozen=True, eq=False)
class EdgeAttribution:
    """EAP-IG scores of every edge, averaged over a dataset's pairs."""

    upstream: list[Upstream]  # [U]
    downstream: list[Downstream]  # [V]
    scores: torch.Tensor  # [U, V] float32 CPU, 0 where there is no edge
    valid: torch.Tensor  # [U, V] bool
    steps: int
    metric: str
    n_pairs: int
    extra: dict = field(default_factory=dict)

    @cached_property
    def edges(self) -> list[tuple[Upstream, Downstream, float]]:
        """Every edge as (upstream, downstream, score), largest |score| first."""
        u, v = self.valid.nonzero(as_tuple=True)
        values = self.scores[u, v]
        order = values.abs().argsort(descending=True, stable=True)
        ups, downs, scores = u[order].tolist(), v[order].tolist(), values[order].tolist()
        return [(self.upstream[a], self.downstream[b], s) for a, b, s in zip(ups, downs, scores, strict=True)]


def head_writes(block, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What each head wrote, through Gemma's norm after attention frozen at the output y.
    # z [B, H, N, d], y [B, N, hidden] -> [H, B, N, hidden] float32"""
    attn = block.self_attn
    w_o = attn.o_proj.weight.float().view(-1, attn.n_heads, attn.head_dim)  # [hidden, H, d]
    parts = torch.einsum("bhnd,khd->hbnk", z.float(), w_o)
    scale = block.attention_write_scale(y)  # [B, N, hidden] or None
    return parts if scale is None else parts * scale


def writes(model, t: Trace) -> torch.Tensor:
    """Every upstream node's write in a traced run.  # -> [U, B, N, hidden] float32"""
    parts = [t.resid[0].float()[None]]
    for layer, block in enumerate(model.layers):
        parts += [head_writes(block, t.z[layer], t.attention_output[layer]), t.mlp[layer].float()[None]]
    return torch.cat(parts)


def project_heads(block, kind: str, inputs: torch.Tensor) -> torch.Tensor:
    """Each head's projection of its own input, through the block's input norm.
    # inputs [B, heads, N, hidden] -> [B, heads, N, d]"""
    attn = block.self_attn
    proj = {"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}[kind]
    heads, d = inputs.shape[1], attn.head_dim
    normed = block.attention_input(inputs)
    out = torch.einsum("bhnk,hdk->bhnd", normed, proj.weight.view(heads, d, -1))
    return out if proj.bias is None else out + proj.bias.view(heads, 1, d)


def reader_slices(config, layer: int) -> dict[str, slice]:
    """Columns of `layer`'s readers among the downstream nodes."""
    base, h, kv = layer * readers_per_layer(config), config.n_heads, config.n_kv_heads
    return {
        "q": slice(base, base + h),
        "k": slice(base + h, base + h + kv),
        "v": slice(base + h + kv, base + h + 2 * kv),
        "mlp": slice(base + h + 2 * kv, base + h + 2 * kv + 1),
    }


ARITY = {"embedding": 1, "head": 3, "q": 3, "k": 3, "v": 3, "mlp": 2, "logits": 1}  # without a position


def edge_indices(config, edges, n_tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each edge's upstream and downstream index and position (-1: an edge without positions, at every
    one); an edge that does not exist is refused, naming it.  # -> 3 × [E] long"""
    up, down, valid = edge_index(config)
    rows, columns, positions = [], [], []
    for edge in edges:
        u, v = edge[0], edge[1]
        u, v = u if type(u) is tuple else tuple(u), v if type(v) is tuple else tuple(v)
        row, column, at = up.get(u), down.get(v), -1
        if row is None or column is None:  # named with positions (or not an edge at all)
            (base_u, at), (base_v, read_at) = _positioned(u, n_tokens), _positioned(v, n_tokens)
            row, column = up.get(base_u), down.get(base_v)
            if row is None or column is None:
                _refuse(u, v)
            if at != read_at or at < 0 or (base_v == ("logits",) and at != n_tokens - 1):
                _refuse(u, v, positional=True)
        rows.append(row)
        columns.append(column)
        positions.append(at)
    indices = tuple(torch.tensor(values, dtype=torch.long) for values in (rows, columns, positions))
    wrong = (~valid[indices[0], indices[1]]).nonzero()
    if len(wrong):
        first = int(wrong[0])
        _refuse(tuple(edges[first][0]), tuple(edges[first][1]))
    return indices


def _positioned(node: tuple, n_tokens: int) -> tuple[tuple, int]:
    """A node without its position, and the position (-1: none given); a negative one counts from the
    end."""
    if not node or node[0] not in ARITY or len(node) not in (ARITY[node[0]], ARITY[node[0]] + 1):
        return node, -1
    if len(node) == ARITY[node[0]]:
        return node, -1
    *base, at = node
    if isinstance(at, bool) or not isinstance(at, int) or not -n_tokens <= at < n_tokens:
        raise ValueError(f"{node!r}: its position {at!r} is not one of the prompts' {n_tokens} positions")
    return tuple(base), at % n_tokens


def kept_mask(
    config, indices: tuple[torch.Tensor, torch.Tensor, torch.Tensor], n_tokens: int
) -> torch.Tensor:
    """The edges of `edge_indices` as a mask over (upstream, downstream, position).  # -> [U, V, N] bool"""
    rows, columns, positions = indices
    kept = torch.zeros(*edge_index(config)[2].shape, n_tokens, dtype=torch.bool)
    everywhere = positions < 0
    kept[rows[everywhere], columns[everywhere]] = True
    kept[rows[~everywhere], columns[~everywhere], positions[~everywhere]] = True
    return kept


@functools.lru_cache(maxsize=4)
def edge_index(config) -> tuple[dict, dict, torch.Tensor]:
    """Each upstream's and downstream's index, and the valid edges [U, V] bool (a config's, kept)."""
    up = {node: i for i, node in enumerate(upstream_nodes(config))}
    down = {node: i for i, node in enumerate(downstream_nodes(config))}
    return up, down, valid_edges(config)


def _refuse(u, v, positional: bool = False):
    if positional:
        raise ValueError(
            f"({u!r}, {v!r}) is not a positional edge: a writer at one position writes into readers at that "
            f"position (the logits read the last), and an edge names a position at both ends or at neither"
        )
    raise ValueError(f"({u!r}, {v!r}) is not an edge of this model (an upstream writes before it is read)")


def edge_attribution(explorer, data: pairs.Dataset, steps: int = 5) -> EdgeAttribution:
    """EAP-IG scores of every edge over the dataset (module doc)."""
    scores = edge_scores(explorer, data, steps)
    return EdgeAttribution(
        upstream=upstream_nodes(explorer.config),
        downstream=downstream_nodes(explorer.config),
        scores=scores,
        valid=valid_edges(explorer.config),
        steps=steps,
        metric=data.metric,
        n_pairs=data.size,
    )


@torch.no_grad()  # the steps' backwards enable it for themselves: no score keeps a graph
def edge_scores(
    explorer, data: pairs.Dataset, steps: int = 5, positional: bool = False, baselines: dict | None = None
) -> torch.Tensor:
    """EAP-IG scores of every edge averaged over the pairs, 0 where there is no edge; `positional`: each
    position's part apart (a writer at p into a reader at p), which needs pairs of one length. Into
    `baselines`, if given, the metric of the clean and of the corrupted prompts, averaged.
    # -> [U, V] float32 CPU, or [U, V, N] with `positional`"""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps is a whole number of at least 1, got {steps!r}")
    if positional:
        pairs.require_one_length(data)
    model, config = explorer.model, explorer.config
    valid = valid_edges(config)
    n = data.batches[0].n_tokens
    scores = torch.zeros(*valid.shape, *((n,) if positional else ()))  # [U, V] or [U, V, N]
    contract, into_logits = (
        ("ubnk,brnk->urn", "ubnk,bnk->un") if positional else ("ubnk,brnk->ur", "ubnk,bnk->u")
    )
    for batch in deadline.steps(data.batches, [batch.size for batch in data.batches]):
        clean, corrupted = trace(model, batch.clean), trace(model, batch.corrupted)
        reference = None
        if data.metric == "kl":
            reference = pairs.log_probs(model, clean.final[:, -1])
        if baselines is not None:
            for name, run in (("clean", clean), ("corrupted", corrupted)):
                metric = pairs.metric_of(model, run.final[:, -1], batch, data.metric, reference)
                baselines[name] = baselines.get(name, 0.0) + float(metric.sum()) / data.size
        difference = writes(model, clean).sub_(writes(model, corrupted))  # [U, B, N, hidden]
        gradients = _input_gradients(model, batch, clean, corrupted, steps, data.metric, reference)
        for layer, grad in enumerate(gradients[:-1]):  # [B, readers, N, hidden]
            count, mlp_count = written_before(config, layer), written_before(config, layer, mlp=True)
            columns = slice(layer * readers_per_layer(config), (layer + 1) * readers_per_layer(config))
            block = torch.einsum(contract, difference[:mlp_count], grad).cpu()  # [U_l, readers(, N)]
            block[count:, :-1] = 0  # the block's own heads feed its MLP, not its q/k/v
            scores[:mlp_count, columns] += block
        scores[:, -1] += torch.einsum(into_logits, difference, gradients[-1]).cpu()
        del clean, corrupted, difference, gradients  # before the next batch's are made
    return scores.mul_(valid_positional(config, n) if positional else valid).div_(data.size)


def _input_gradients(model, batch, clean: Trace, corrupted: Trace, steps, metric, reference) -> list:
    """∂M/∂(each downstream node's input), averaged over the steps: one [B, readers, N, hidden] per
    layer (q heads, k, v kv heads, the MLP, as `reader_slices`), then the final norm's [B, N, hidden]."""
    config = model.config
    leaves = {kind: torch.zeros_like(corrupted.of(kind), requires_grad=True) for kind in ("q", "k", "v")}
    mlp_leaf = torch.zeros_like(corrupted.resid, requires_grad=True)  # [L, B, N, hidden]
    final_leaf = torch.zeros_like(corrupted.resid[0], requires_grad=True)
    streams: dict[int, torch.Tensor] = {}

    def add(kind):
        return lambda layer, value: value + leaves[kind][layer]

    def block_input(layer, x):
        streams[layer] = x.detach()

    def block_output(layer, x):
        return x + final_leaf if layer == config.n_layers - 1 else None

    taps = Taps(
        block_input=block_input,
        q=add("q"),
        k=add("k"),
        v=add("v"),
        mlp_input=lambda layer, x: x + mlp_leaf[layer],
        block_output=block_output,
    )
    start, difference = corrupted.resid[0], clean.resid[0] - corrupted.resid[0]
    totals = None
    for k in deadline.steps(range(1, steps + 1)):
        with torch.enable_grad():
            final = model.hidden_states(stream=start + k / steps * difference, taps=taps)
            total = pairs.metric_of(model, final[:, -1], batch, metric, reference).sum()
            found = torch.autograd.grad(total, [*leaves.values(), mlp_leaf, final_leaf])
        # each layer's gradient carried back and added in place: one layer of a step's alive at a time
        step = (_through_input_norm(model, layer, streams[layer], found) for layer in range(config.n_layers))
        if totals is None:
            totals = [*step, found[-1].float()]
        else:
            for total, grad in zip(totals, itertools.chain(step, [found[-1]]), strict=True):
                total.add_(grad)
        del found
    return [total.div_(steps) for total in totals]


def _through_input_norm(model, layer: int, x: torch.Tensor, found) -> torch.Tensor:
    """The gradients at q/k/v's outputs carried back to each head's own input, through its projection
    and the block's input norm y = g ⊙ x · r, r = 1 / RMS(x), whose backward is r (g ⊙ u) − x r³ ·
    mean(x ⊙ g ⊙ u); the MLP input's beside them.  # -> [B, readers, N, hidden] float32"""
    block = model.layers[layer]
    attn = block.self_attn
    inverse_rms, weight = block.attention_input_factors(x)  # [B, N, 1], [hidden]
    x32, r = x.float()[:, None], inverse_rms[:, None]  # [B, 1, N, hidden], [B, 1, N, 1]
    parts = []
    for proj, grad in ((attn.q_proj, found[0]), (attn.k_proj, found[1]), (attn.v_proj, found[2])):
        grad = grad[layer].float()  # [B, heads, N, d]
        w = proj.weight.float().view(grad.shape[1], attn.head_dim, -1)  # [heads, d, hidden]
        gu = torch.einsum("bhnd,hdk->bhnk", grad, w) * weight  # [B, heads, N, hidden]
        parts.append(r * gu - x32 * r.pow(3) * (gu * x32).mean(-1, keepdim=True))
    return torch.cat([*parts, found[3][layer].float()[:, None]], dim=1)

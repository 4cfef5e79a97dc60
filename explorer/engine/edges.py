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

- `circuit_metric` runs the clean prompts with every downstream input reading its upstream's write in
  that run along kept edges and its write in the corrupted run along the others: the input is the
  stream less Σ over removed edges (current write − corrupted write). A q/k/v input then differs per
  head, so the projection's tap recomputes its heads from their own inputs through the block's input norm
  and the projection's weights. Every edge kept: the clean run; none: the corrupted run.
- `edge_attribution`: score(u → v) = (clean write of u − corrupted write of u) · mean over α = k/steps,
  k = 1..steps, of ∂M/∂(input of v), M the metric summed over the pairs, at the run whose embedding is
  corrupted + α (clean − corrupted); averaged over the pairs. The gradients come from one forward and
  backward per step, through zero leaves the taps add to q/k/v's outputs, the MLP's input and the final
  norm's input; a q/k/v head's gradient is carried back to its own input through the input norm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import torch

from explorer.engine import pairs
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


def _written_before(config, layer: int, mlp: bool = False) -> int:
    """How many upstream nodes write before `layer`'s attention reads (its MLP, with `mlp`)."""
    return 1 + layer * (config.n_heads + 1) + (config.n_heads if mlp else 0)


def _readers(config) -> int:
    """Downstream nodes of one layer: H q heads, H_kv k and H_kv v heads, the MLP."""
    return config.n_heads + 2 * config.n_kv_heads + 1


def valid_edges(config) -> torch.Tensor:
    """Which (upstream, downstream) pairs are edges.  # [U, V] bool"""
    ups, downs = len(upstream_nodes(config)), len(downstream_nodes(config))
    valid = torch.zeros(ups, downs, dtype=torch.bool)
    per = _readers(config)
    for layer in range(config.n_layers):
        valid[: _written_before(config, layer), layer * per : (layer + 1) * per - 1] = True
        valid[: _written_before(config, layer, mlp=True), (layer + 1) * per - 1] = True
    valid[:, -1] = True
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


def _head_writes(block, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
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
        parts += [_head_writes(block, t.z[layer], t.attention_output[layer]), t.mlp[layer].float()[None]]
    return torch.cat(parts)


def _project_heads(block, kind: str, inputs: torch.Tensor) -> torch.Tensor:
    """Each head's projection of its own input, through the block's input norm.
    # inputs [B, heads, N, hidden] -> [B, heads, N, d]"""
    attn = block.self_attn
    proj = {"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}[kind]
    heads, d = inputs.shape[1], attn.head_dim
    normed = block.attention_input(inputs)
    out = torch.einsum("bhnk,hdk->bhnd", normed, proj.weight.view(heads, d, -1))
    return out if proj.bias is None else out + proj.bias.view(heads, 1, d)


def _slices(config, layer: int) -> dict[str, slice]:
    """Columns of `layer`'s readers among the downstream nodes."""
    base, h, kv = layer * _readers(config), config.n_heads, config.n_kv_heads
    return {
        "q": slice(base, base + h),
        "k": slice(base + h, base + h + kv),
        "v": slice(base + h + kv, base + h + 2 * kv),
        "mlp": slice(base + h + 2 * kv, base + h + 2 * kv + 1),
    }


def kept_mask(config, edges) -> torch.Tensor:
    """The kept edges as a mask over (upstream, downstream); an edge that does not exist is refused.
    # -> [U, V] bool"""
    up = {node: i for i, node in enumerate(upstream_nodes(config))}
    down = {node: i for i, node in enumerate(downstream_nodes(config))}
    valid, kept = valid_edges(config), torch.zeros(len(up), len(down), dtype=torch.bool)
    for edge in edges:
        u, v = tuple(edge[0]), tuple(edge[1])
        if u not in up or v not in down or not valid[up[u], down[v]]:
            raise ValueError(
                f"({u!r}, {v!r}) is not an edge of this model (an upstream writes before it is read)"
            )
        kept[up[u], down[v]] = True
    return kept


def circuit_metric(explorer, data: pairs.Dataset, edges) -> float:
    """The metric of the circuit of kept `edges`, exactly, averaged over the pairs (module doc)."""
    return faithfulness(explorer, data, list(edges), [len(edges)])[0]


def faithfulness(explorer, data: pairs.Dataset, ranked: list, counts: list[int]) -> list[float]:
    """The exact circuit metric of the first `count` of the `ranked` edges, for each count: each batch's
    corrupted run (and clean one for KL) traced once for every count."""
    model, config = explorer.model, explorer.config
    valid = valid_edges(config)
    totals = [0.0] * len(counts)
    with torch.no_grad():
        for batch in data.batches:
            reference = None
            if data.metric == "kl":
                reference = pairs.log_probs(model, trace(model, batch.clean).final[:, -1])
            corrupted = trace(model, batch.corrupted)
            corrupted_writes = writes(model, corrupted)
            explorer.forward_count += 1 + len(counts)
            for i, count in enumerate(counts):
                removed = (~kept_mask(config, ranked[:count]) & valid).to(corrupted.z.device)
                final = _circuit_forward(model, batch, corrupted_writes, removed)
                metric = pairs.metric_of(model, final[:, -1], batch, data.metric, reference)
                totals[i] += float(metric.sum())
    return [total / data.size for total in totals]


def _circuit_forward(model, batch, corrupted_writes: torch.Tensor, removed: torch.Tensor) -> torch.Tensor:
    """The clean prompts' forward, each input reading corrupted writes along `removed` edges."""
    config = model.config
    deltas = torch.zeros_like(corrupted_writes)  # [U, B, N, hidden] current − corrupted write
    streams: dict[int, torch.Tensor] = {}
    heads: dict[int, torch.Tensor] = {}

    def removed_part(count: int, columns: slice) -> torch.Tensor | None:
        cut = removed[:count, columns].to(deltas.dtype)  # [count, readers]
        return None if not cut.any() else torch.einsum("ubnk,ur->brnk", deltas[:count], cut)

    def block_input(layer, x):
        streams[layer] = x
        if layer == 0:
            deltas[0] = x.float() - corrupted_writes[0]

    def heads_tap(layer, z):
        heads[layer] = z

    def attention_output(layer, y):
        first = _written_before(config, layer)
        written = _head_writes(model.layers[layer], heads.pop(layer), y)
        deltas[first : first + config.n_heads] = written - corrupted_writes[first : first + config.n_heads]

    def mlp_output(layer, m):
        index = _written_before(config, layer, mlp=True)
        deltas[index] = m.float() - corrupted_writes[index]

    def projection(kind):
        def tap(layer, value):
            part = removed_part(_written_before(config, layer), _slices(config, layer)[kind])
            if part is None:
                return None
            inputs = streams[layer][:, None] - part.to(value.dtype)  # [B, heads, N, hidden]
            return _project_heads(model.layers[layer], kind, inputs)

        return tap

    def mlp_input(layer, x):
        part = removed_part(_written_before(config, layer, mlp=True), _slices(config, layer)["mlp"])
        return None if part is None else x - part[:, 0].to(x.dtype)

    def block_output(layer, x):
        if layer != config.n_layers - 1:
            return None
        part = removed_part(len(deltas), slice(-1, None))
        return None if part is None else x - part[:, 0].to(x.dtype)

    taps = Taps(
        block_input=block_input,
        k=projection("k"),
        v=projection("v"),
        q=projection("q"),
        heads=heads_tap,
        attention_output=attention_output,
        mlp_input=mlp_input,
        mlp_output=mlp_output,
        block_output=block_output,
    )
    return model.hidden_states(batch.clean, taps=taps)


def edge_attribution(explorer, data: pairs.Dataset, steps: int = 5) -> EdgeAttribution:
    """EAP-IG scores of every edge over the dataset (module doc)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps is a whole number of at least 1, got {steps!r}")
    model, config = explorer.model, explorer.config
    valid = valid_edges(config)
    scores = torch.zeros(valid.shape)
    for batch in data.batches:
        clean, corrupted = trace(model, batch.clean), trace(model, batch.corrupted)
        explorer.forward_count += 2
        reference = None
        if data.metric == "kl":
            reference = pairs.log_probs(model, clean.final[:, -1])
        difference = writes(model, clean) - writes(model, corrupted)  # [U, B, N, hidden]
        gradients = _input_gradients(model, batch, clean, corrupted, steps, data.metric, reference)
        explorer.forward_count += steps
        for layer, grad in enumerate(gradients[:-1]):  # [B, readers, N, hidden]
            count, mlp_count = _written_before(config, layer), _written_before(config, layer, mlp=True)
            columns = slice(layer * _readers(config), (layer + 1) * _readers(config))
            block = torch.einsum("ubnk,brnk->ur", difference[:mlp_count], grad).cpu()  # [U_l, readers]
            block[count:, :-1] = 0  # the block's own heads feed its MLP, not its q/k/v
            scores[:mlp_count, columns] += block
        scores[:, -1] += torch.einsum("ubnk,bnk->u", difference, gradients[-1]).cpu()
    return EdgeAttribution(
        upstream=upstream_nodes(config),
        downstream=downstream_nodes(config),
        scores=scores * valid / data.size,
        valid=valid,
        steps=steps,
        metric=data.metric,
        n_pairs=data.size,
    )


def _input_gradients(model, batch, clean: Trace, corrupted: Trace, steps, metric, reference) -> list:
    """∂M/∂(each downstream node's input), averaged over the steps: one [B, readers, N, hidden] per
    layer (q heads, k, v kv heads, the MLP, as `_slices`), then the final norm's [B, N, hidden]."""
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
    for k in range(1, steps + 1):
        with torch.enable_grad():
            final = model.hidden_states(stream=start + k / steps * difference, taps=taps)
            total = pairs.metric_of(model, final[:, -1], batch, metric, reference).sum()
            found = torch.autograd.grad(total, [*leaves.values(), mlp_leaf, final_leaf])
        per_layer = [_through_input_norm(model, layer, streams[layer], found) for layer in streams]
        step = [*per_layer, found[-1].float()]
        totals = step if totals is None else [a + b for a, b in zip(totals, step, strict=True)]
    return [t / steps for t in totals]


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

"""Nodes of a model's computation, patched exactly from a clean run into a corrupted one, or estimated
by attribution patching (AtP, Nanda 2023), every one on the model's one forward with taps.

A node is a tuple:
    ("z", layer, head, pos)     a head's output probs @ v, before o_proj (TL's hook_z)
    ("q", layer, head, pos)     q_proj's output, before QK-norm and RoPE (TL's hook_q)
    ("k", layer, kv_head, pos)  k_proj's output, per kv head (TL's hook_k)
    ("v", layer, kv_head, pos)  v_proj's output, per kv head (TL's hook_v)
    ("resid", layer, pos)       the stream entering block `layer` (TL's hook_resid_pre)
    ("mlp", layer, pos)         what the MLP writes (TL's hook_mlp_out)
pos None: every position at once.

- `patch_nodes`: the corrupted run with one node alone set to its clean value; the metric per node,
  averaged over the pairs. As the head-patching sweep does (`explorer.engine.interventions`), the patches
  that start at position s go down the model in one batch that grows as it goes: a node of layer l joins
  at l from the corrupted run's cached input of l, and only positions s.. are recomputed (the causal
  model leaves the earlier ones as they were), reading the corrupted keys and values before s from a
  prefix cache; the last block computes the last position alone.
- `attribution_patching`: (a_clean − a_corrupted) · ∂M/∂a at the corrupted run, every node from one
  forward and one backward of each batch of pairs; the gradient of a tapped activation is that of a
  zero tensor added to it by its tap. `qk_fix` (AtP*, Kramár et al. 2024): a q or k node's effect is
  read through the exact change of the attention pattern it causes, times ∂M/∂pattern (the pattern
  enters the head's output linearly, z = pattern @ v, so ∂M/∂pattern = ∂M/∂z · vᵀ), in place of the
  linear estimate through the softmax.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from explorer.engine import deadline, pairs, rope
from explorer.engine.attention import kv_head_map
from explorer.engine.edits import Edits
from explorer.engine.kv_cache import KVCache, PrefixCache
from explorer.engine.rows import attention_rows
from explorer.engine.taps import NO_TAPS, Taps

HEAD_KINDS = ("z", "q", "k", "v")  # (kind, layer, head, pos)
STREAM_KINDS = ("resid", "mlp")  # (kind, layer, pos)
KINDS = HEAD_KINDS + STREAM_KINDS


@dataclass(frozen=True)
class Node:
    kind: str
    layer: int
    head: int | None  # the query head (z, q) or kv head (k, v); None for stream kinds
    pos: int | None  # None: every position


def parse_node(config, node) -> Node:
    """A checked node from its tuple (see the module doc); pos may be negative (from the end)."""
    if not isinstance(node, (tuple, list)) or not node or node[0] not in KINDS:
        raise ValueError(f"a node is a tuple whose first item is one of {', '.join(KINDS)}, got {node!r}")
    kind, *rest = node
    expected = 3 if kind in HEAD_KINDS else 2
    if len(rest) != expected:
        shape = "(kind, layer, head, pos)" if kind in HEAD_KINDS else "(kind, layer, pos)"
        raise ValueError(f"a {kind!r} node is {shape}, got {tuple(node)!r}")
    layer, *head, pos = rest
    _check_index("layer", layer, config.n_layers, node)
    if head:
        count = config.n_kv_heads if kind in ("k", "v") else config.n_heads
        _check_index("kv head" if kind in ("k", "v") else "head", head[0], count, node)
    if pos is not None and (isinstance(pos, bool) or not isinstance(pos, int)):
        raise ValueError(f"pos of node {tuple(node)!r} is a position or None (every position)")
    return Node(kind, layer, head[0] if head else None, pos)


def _check_index(name: str, value, count: int, node) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise ValueError(f"{name} {value!r} of node {tuple(node)!r} is out of range: 0 to {count - 1}")


def _position(node: Node, n: int) -> int | None:
    if node.pos is None:
        return None
    if not -n <= node.pos < n:
        raise ValueError(f"position {node.pos} of a {node.kind!r} node is outside the {n}-token prompts")
    return node.pos % n


RECORDED = ("resid", "q", "k", "v", "z", "attention_output", "mlp")  # what a trace can record


@dataclass(kw_only=True)
class Trace:
    """A batch of prompts' forward, the node kinds asked for recorded (model dtype, model device); a
    kind not asked for is None."""

    resid: torch.Tensor | None  # [L, B, N, hidden] the stream entering each block
    q: torch.Tensor | None  # [L, B, H, N, d]
    k: torch.Tensor | None  # [L, B, H_kv, N, d]
    v: torch.Tensor | None  # [L, B, H_kv, N, d]
    z: torch.Tensor | None  # [L, B, H, N, d]
    attention_output: torch.Tensor | None  # [L, B, N, hidden] o_proj's output
    mlp: torch.Tensor | None  # [L, B, N, hidden]
    final: torch.Tensor  # [B, N, hidden] after the final norm
    cache: KVCache | None  # rotated keys and values (batch 1 only)
    leaves: dict[str, torch.Tensor]  # kind -> zero leaf its taps added, shaped as its record

    def of(self, kind: str) -> torch.Tensor:
        return self.resid if kind == "resid" else getattr(self, kind)


def trace(
    model,
    ids: torch.Tensor,
    keep_cache: bool = False,
    grad_kinds=(),
    kinds=RECORDED,
    edits: Edits | None = None,
) -> Trace:
    """One forward of `ids` [B, N] with each of `kinds` recorded (every one by default); its rotated keys
    and values too for a single prompt with `keep_cache`. The kinds in `grad_kinds` (recorded too) get a
    zero leaf added by their taps (`Trace.leaves`), the forward recorded by autograd, `Trace.final` its
    output. `edits` are written on the forward as `under` places them."""
    c, weight = model.config, model.embed_tokens.weight
    (b, n), options = ids.shape, dict(dtype=weight.dtype, device=weight.device)
    heads, kv = (c.n_layers, b, c.n_heads, n, c.head_dim), (c.n_layers, b, c.n_kv_heads, n, c.head_dim)
    stream = (c.n_layers, b, n, c.hidden_size)
    shapes = dict(resid=stream, q=heads, k=kv, v=kv, z=heads, attention_output=stream, mlp=stream)
    recorded = set(kinds) | set(grad_kinds)
    stores = {name: torch.empty(shape, **options) for name, shape in shapes.items() if name in recorded}
    leaves = {kind: torch.zeros(shapes[kind], **options, requires_grad=True) for kind in grad_kinds}

    def point(name):
        if name not in stores:
            return None

        def tap(layer: int, value: torch.Tensor) -> torch.Tensor | None:
            stores[name][layer].copy_(value.detach())
            return value + leaves[name][layer] if name in leaves else None

        return tap

    taps = Taps(
        block_input=point("resid"),
        q=point("q"),
        k=point("k"),
        v=point("v"),
        heads=point("z"),
        attention_output=point("attention_output"),
        mlp_output=point("mlp"),
    )
    cache = KVCache(c, n, **options) if keep_cache else None
    with torch.set_grad_enabled(bool(leaves)):
        final = model.hidden_states(ids, taps=under(edits, range(n), taps), cache=cache)
    records = {name: stores.get(name) for name in shapes}
    return Trace(**records, final=final, cache=cache, leaves=leaves)


def under(edits: Edits | None, positions: range, taps: Taps) -> Taps:
    """`taps` (recorders, patches) on a forward over `positions` that `edits` write on: each point's
    edit first, so they read and patch the edited model's values; but the stream entering a block is
    read and patched before its edit, which then writes on it as on the run's own."""
    if edits is None:
        return taps
    written = edits.taps(positions)
    after = Taps(block_input=written.block_input)
    return dataclasses.replace(written, block_input=None).then(taps).then(after)


def patch_nodes(explorer, data: pairs.Dataset, nodes: list, edits=None) -> torch.Tensor:
    """Each node patched alone from the clean run into the corrupted one, on the model `edits` change
    (every run of the pair and every patched one): the metric averaged over the dataset's pairs (see the
    module doc).  # -> [len(nodes)] float32 CPU"""
    model = explorer.model
    parsed = [parse_node(model.config, node) for node in nodes]
    total = torch.zeros(len(parsed))
    with torch.no_grad():
        each = [(batch, b) for batch in data.batches for b in range(batch.size)]  # every pair
        for batch, b in deadline.steps(each, [batch.n_tokens for batch, _ in each]):
            one = _pair(batch, b)
            edited = Edits.parse(model.config, edits, one.n_tokens)
            clean = trace(model, one.clean, True, edits=edited)
            corrupted = trace(model, one.corrupted, True, edits=edited)
            reference = pairs.log_probs(model, clean.final[:, -1]) if data.metric == "kl" else None
            total += _sweep(model, one, parsed, clean, corrupted, data.metric, reference, edited).cpu()
    return total / data.size


def _pair(batch: pairs.Batch, b: int) -> pairs.Batch:
    pick = slice(b, b + 1)
    distractors = None if batch.distractors is None else batch.distractors[pick]
    return pairs.Batch(
        batch.clean[pick], batch.corrupted[pick], batch.answers[pick], distractors, batch.indices[pick]
    )


def _sweep(
    model, one, parsed: list[Node], clean: Trace, corrupted: Trace, metric, reference, written: Edits | None
) -> torch.Tensor:
    """The patched metric of each node for one pair (module doc).  # -> [len(parsed)] float32"""
    n, last = one.n_tokens, model.config.n_layers - 1
    result = torch.zeros(len(parsed), device=clean.final.device)
    # Positions before the first difference hold the same values in both runs: a patch there changes
    # nothing, so no node is recomputed from before it.
    first = min(one.first_difference, n - 1)
    starts: dict[int, list[int]] = {}
    for i, node in enumerate(parsed):
        pos = _position(node, n)
        starts.setdefault(max(first, 0 if pos is None else pos), []).append(i)
    # each start's layers, and its rows at each (its nodes joined so far): how much work each step is
    layers = {s: range(min(parsed[i].layer for i in members), last + 1) for s, members in starts.items()}
    rows_at = {s: [sum(parsed[i].layer <= layer for i in starts[s]) for layer in layers[s]] for s in starts}
    for start, members in deadline.steps(starts.items(), [sum(rows_at[s]) * (n - s) for s in starts]):
        prefix = PrefixCache(corrupted.cache.k[:, :, :start], corrupted.cache.v[:, :, :start])
        rows, order = None, []
        for layer in deadline.steps(layers[start], rows_at[start]):
            joining = [i for i in members if parsed[i].layer == layer]
            taps = NO_TAPS
            if joining:
                stream = corrupted.resid[layer, :, start:].expand(len(joining), -1, -1).clone()  # [J, M, h]
                offset = 0 if rows is None else rows.shape[0]
                edits = [(offset + j, parsed[i], _position(parsed[i], n)) for j, i in enumerate(joining)]
                for row, node, pos in edits:
                    if node.kind == "resid" and (pos is None or pos >= start):
                        where = slice(None) if pos is None else pos - start
                        stream[row - offset, where] = clean.resid[layer, 0, start:][where]
                rows = stream if rows is None else torch.cat([rows, stream])
                order += joining
                taps = _patch_taps(clean, layer, edits, n)
            rows = model.hidden_states(
                stream=rows,
                layers=range(layer, layer + 1),
                positions=range(start, n),
                cache=prefix,
                taps=under(written, range(start, n), taps),
                last_only=layer == last,
            )
        result[order] = pairs.metric_of(model, rows[:, -1], one, metric, reference)
    return result


def _patch_taps(clean: Trace, layer: int, edits: list[tuple[int, Node, int | None]], n: int) -> Taps:
    """Taps that set each edited row's node to its clean value at `layer` (the rows of a pass: positions
    n − M.. of the M computed)."""

    def tap_for(kind: str):
        mine = [(row, node, pos) for row, node, pos in edits if node.kind == kind]
        if not mine:
            return None

        def tap(at: int, value: torch.Tensor) -> torch.Tensor | None:
            if at != layer:
                return None
            value = value.clone()
            axis = 1 if kind == "mlp" else 2  # the positions' axis
            first = n - value.shape[axis]  # the first position computed
            source = clean.of(kind)[layer, 0]  # [(H,) N, ...]
            for row, node, pos in mine:
                if pos is not None and pos < first:
                    continue  # a position this block does not compute (the last block: the last alone)
                where = slice(first, None) if pos is None else slice(pos, pos + 1)
                local = slice(None) if pos is None else slice(pos - first, pos - first + 1)
                if kind == "mlp":
                    value[row, local] = source[where]
                else:
                    value[row, node.head, local] = source[node.head, where]
            return value

        return tap

    return Taps(q=tap_for("q"), k=tap_for("k"), v=tap_for("v"), heads=tap_for("z"), mlp_output=tap_for("mlp"))


def attribution_patching(
    explorer, data: pairs.Dataset, nodes: list, qk_fix: bool = False, edits=None
) -> torch.Tensor:
    """AtP of each node on the model `edits` change, averaged over the dataset's pairs; with `qk_fix`,
    AtP*'s exact attention for q and k nodes (see the module doc).  # -> [len(nodes)] float32 CPU"""
    model = explorer.model
    parsed = [parse_node(model.config, node) for node in nodes]
    fixed = [qk_fix and node.kind in ("q", "k") for node in parsed]
    linear = sorted({node.kind for node, exact in zip(parsed, fixed, strict=True) if not exact})
    grad_kinds = sorted(set(linear) | ({"z"} if any(fixed) else set()))
    patterns = {"q", "k"} if any(fixed) else set()  # AtP* reads both runs' q and k, the corrupted v
    values = {"v"} if any(fixed) else set()
    total = torch.zeros(len(parsed))
    for batch in deadline.steps(data.batches, [batch.size for batch in data.batches]):
        edited = Edits.parse(model.config, edits, batch.n_tokens)
        clean = trace(model, batch.clean, kinds=set(linear) | patterns, edits=edited)
        reference = pairs.log_probs(model, clean.final[:, -1]) if data.metric == "kl" else None
        # its activations and the graph
        corrupted = trace(
            model, batch.corrupted, grad_kinds=grad_kinds, kinds=patterns | values, edits=edited
        )
        metric = pairs.metric_of(model, corrupted.final[:, -1], batch, data.metric, reference).sum()
        found = torch.autograd.grad(metric, [corrupted.leaves[kind] for kind in grad_kinds])
        grads = dict(zip(grad_kinds, found, strict=True))
        with torch.no_grad():
            # (a_clean − a_corrupted) · ∂M/∂a over the head size (or hidden), summed over the pairs
            # -> [L, H, N] for a head kind, [L, N] for a stream kind, on CPU
            products = {
                kind: ((clean.of(kind) - corrupted.of(kind)).float() * grads[kind].float())
                .sum(-1)
                .sum(1)
                .cpu()
                for kind in linear
            }
            total += _read_nodes(parsed, fixed, products, batch.n_tokens)
            for i in (i for i, exact in enumerate(fixed) if exact):
                pos = _position(parsed[i], batch.n_tokens)
                found = _pattern_effect(model, parsed[i], pos, clean, corrupted, grads["z"], edited)
                total[i] += float(found)
    return total / data.size


def _read_nodes(parsed: list[Node], fixed: list[bool], products: dict, n: int) -> torch.Tensor:
    """Each node's product (its position's, or summed over the positions for pos None); 0 for the
    nodes AtP* reads.  # -> [len(parsed)] float32"""
    found = torch.zeros(len(parsed))
    for kind, product in products.items():
        at = [i for i, node in enumerate(parsed) if node.kind == kind and not fixed[i]]
        if not at:
            continue
        rows = product if kind in STREAM_KINDS else product.flatten(0, 1)  # [L·H or L, N]
        per_position = torch.cat([rows, rows.sum(-1, keepdim=True)], -1)  # [.., N + 1]: N is every one
        index, where = [], []
        for i in at:
            node = parsed[i]
            index.append(node.layer if node.head is None else node.layer * product.shape[1] + node.head)
            pos = _position(node, n)
            where.append(n if pos is None else pos)
        found[at] = per_position[index, where]
    return found


def _pattern_effect(model, node: Node, pos, clean: Trace, corrupted: Trace, grad_z: torch.Tensor, edits):
    """AtP*'s estimate for a q or k node: Σ (pattern patched − pattern) · ∂M/∂pattern over the heads it
    reaches, the pattern recomputed exactly through QK-norm, RoPE, the mask (less `edits`' knockout) and
    the softmax (of the scores `edits` write)."""
    layer, c = node.layer, model.config
    attn = model.layers[layer].self_attn
    n = corrupted.q.shape[3]
    q, k = corrupted.q[layer].float(), corrupted.k[layer].float()  # [B, H, N, d], [B, H_kv, N, d]
    where = slice(None) if pos is None else slice(pos, pos + 1)
    patched_q, patched_k = q.clone(), k.clone()
    if node.kind == "q":
        patched_q[:, node.head, where] = clean.q[layer, :, node.head, where].float()
        heads = [node.head]
    else:
        patched_k[:, node.head, where] = clean.k[layer, :, node.head, where].float()
        heads = (kv_head_map(c.n_heads, c.n_kv_heads) == node.head).nonzero().flatten().tolist()
    cos, sin = model.pass_over(range(n), torch.float32).rope(attn.window is not None)
    positions = torch.arange(n, device=q.device)
    written = NO_TAPS if edits is None else edits.taps(range(n))
    scoring = Taps(
        scores=written.scores, knockout=written.knockout, stagewise_layers=written.stagewise_layers
    )

    def pattern(q_proj, k_proj):
        q_normed, k_normed = attn.qk_normed(q_proj, k_proj)
        q_rot, k_rot = rope.apply_rope(q_normed, cos, sin), rope.apply_rope(k_normed, cos, sin)
        rows = attention_rows(q_rot, k_rot, positions, attn.scale, attn.window, layer, scoring)
        return rows.probs  # [B, H, N, N]

    change = (pattern(patched_q, patched_k) - pattern(q, k))[:, heads]  # [B, h, N, N]
    kv = kv_head_map(c.n_heads, c.n_kv_heads)[heads]
    values = corrupted.v[layer][:, kv].float()  # [B, h, N, d]
    grad_pattern = grad_z[layer][:, heads] @ values.transpose(-1, -2)  # [B, h, N queries, N keys]
    return (change * grad_pattern).sum()

"""A circuit of kept edges (`engine.edges`) measured exactly, and the corrupted runs it is measured
against, recorded once per batch of pairs and kept on the Explorer for the next circuit of the same pairs.

`circuit_metric` runs the clean prompts with every downstream input reading its upstream's write in that
run along kept edges and its write in the corrupted run along the others: the input is the stream less
Σ over removed edges (current write − corrupted write). A q/k/v input then differs per head, so the
projection's tap recomputes its heads from their own inputs through the block's input norm and the
projection's weights. Every edge kept: the clean run; none: the corrupted run. `faithfulness` measures
the circuits of several counts of ranked edges on one corrupted run each batch.

A circuit's forward needs, of the corrupted run, what each writer wrote: the embedding, each head's
output before o_proj (its write is that times its slice of W_O, so the head's change is the change of z
through it), o_proj's output where a norm after attention scales the heads' writes (Gemma), each MLP's
output; and for the KL metric the clean run's next-token log-probabilities. That is some 2 + 2L rows
of [B, N, hidden] (3L with Gemma's norm), a tenth of every writer's own write.

`CorruptedRuns` keeps the latest ones, least recently used out first, up to `KEEP_BYTES` in all; a run
larger than that is recorded for its call and not kept. Its key is the batch's token ids, clean and
corrupted, and whether the metric reads the clean run (KL): another dataset, even of the same length,
never reads these writes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from explorer.engine import deadline, edges, pairs
from explorer.engine.taps import Taps

KEEP_BYTES = 64 << 20  # the kept runs' tensors in all: a few datasets of short pairs on a small model


@dataclass(frozen=True, eq=False)
class CorruptedRun:
    """What a batch's corrupted run wrote (model dtype, model device)."""

    embedding: torch.Tensor  # [B, N, hidden] the stream entering block 0
    z: torch.Tensor  # [L, B, H, N, d] each head's output before o_proj
    attention_output: torch.Tensor | None  # [L, B, N, hidden] o_proj's output; None: no norm after it
    mlp: torch.Tensor  # [L, B, N, hidden] what each MLP wrote
    reference: torch.Tensor | None  # [B, vocab] float32 the clean run's log-probs (KL), else None

    @property
    def nbytes(self) -> int:
        parts = (self.embedding, self.z, self.attention_output, self.mlp, self.reference)
        return sum(part.nbytes for part in parts if part is not None)


def record(model, batch: pairs.Batch, metric: str) -> CorruptedRun:
    """One forward of the batch's corrupted prompts recording what each writer wrote (and for KL one of
    its clean prompts)."""
    c, weight = model.config, model.embed_tokens.weight
    (b, n), options = batch.corrupted.shape, dict(dtype=weight.dtype, device=weight.device)
    stream = (c.n_layers, b, n, c.hidden_size)
    z = torch.empty(c.n_layers, b, c.n_heads, n, c.head_dim, **options)
    mlp = torch.empty(stream, **options)
    attention_output = torch.empty(stream, **options) if c.sandwich_norms else None
    embedding = torch.empty(b, n, c.hidden_size, **options)

    def store(into):
        return lambda layer, value: into[layer].copy_(value)

    taps = Taps(
        block_input=lambda layer, x: embedding.copy_(x) if layer == 0 else None,
        heads=store(z),
        attention_output=None if attention_output is None else store(attention_output),
        mlp_output=store(mlp),
    )
    with torch.no_grad():
        model.hidden_states(batch.corrupted, taps=taps)
        reference = None
        if metric == "kl":
            reference = pairs.log_probs(model, model.hidden_states(batch.clean)[:, -1])
    return CorruptedRun(embedding, z, attention_output, mlp, reference)


class CorruptedRuns:
    """The latest corrupted runs, up to `max_bytes` in all (module doc)."""

    def __init__(self, max_bytes: int = KEEP_BYTES):
        self.max_bytes = max_bytes
        self._kept: OrderedDict[tuple, CorruptedRun] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def of(self, model, batch: pairs.Batch, metric: str) -> CorruptedRun:
        """The batch's corrupted run: kept from before, or recorded now (a forward)."""
        key = _key(batch, metric)
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        run = record(model, batch, metric)
        if run.nbytes <= self.max_bytes:
            self._kept[key] = run
            while self.nbytes > self.max_bytes:
                self._kept.popitem(last=False)
        return run


def _key(batch: pairs.Batch, metric: str) -> tuple:
    ids = torch.stack([batch.clean, batch.corrupted]).cpu()  # [2, B, N]
    return tuple(ids.shape), ids.numpy().tobytes(), metric == "kl"


def circuit_metric(explorer, data: pairs.Dataset, kept_edges) -> float:
    """The metric of the circuit of `kept_edges`, exactly, averaged over the pairs (module doc)."""
    return faithfulness(explorer, data, list(kept_edges), [len(kept_edges)])[0]


def faithfulness(explorer, data: pairs.Dataset, ranked: list, counts: list[int]) -> list[float]:
    """The exact circuit metric of the first `count` of the `ranked` edges, for each count, averaged over
    the pairs (`pair_metrics`)."""
    return pair_metrics(explorer, data, ranked, counts).mean(1).tolist()


def pair_metrics(explorer, data: pairs.Dataset, ranked, counts: list[int], indices=None) -> torch.Tensor:
    """The exact circuit metric of the first `count` of the `ranked` edges, for each count and each pair:
    each batch's corrupted run (and clean one for KL) recorded once for every count, or kept from an
    earlier call on the same pairs (`engine.corrupted_runs`, the Explorer's `corrupted_runs`). Edges may
    name positions (`engine.edges`), which needs pairs of one length; `indices`, the edges already as
    `edges.edge_indices` gives them (a `Graph`'s), in place of `ranked`.  # -> [counts, pairs] float64"""
    model, config = explorer.model, explorer.config
    kept_runs = getattr(explorer, "corrupted_runs", None)
    values = torch.zeros(len(counts), data.size, dtype=torch.float64)
    with torch.no_grad():
        for batch in deadline.steps(data.batches, [batch.size for batch in data.batches]):
            n = batch.n_tokens
            at = indices if indices is not None else edges.edge_indices(config, ranked, n)
            positional = bool((at[2] >= 0).any())
            if positional:
                pairs.require_one_length(data)
            # [U, V, N], or [U, V, 1] where no edge names a position: each edge at every position
            valid = (
                edges.valid_positional(config, n) if positional else edges.edge_index(config)[2][..., None]
            )
            if kept_runs is None:
                corrupted = record(model, batch, data.metric)
            else:
                corrupted = kept_runs.of(model, batch, data.metric)
            for i, count in deadline.steps(enumerate(counts)):
                kept = edges.kept_mask(config, tuple(index[:count] for index in at), valid.shape[-1])
                removed = (valid & ~kept).to(corrupted.z.device)
                final = _circuit_forward(model, batch, corrupted, removed)
                metric = pairs.metric_of(model, final[:, -1], batch, data.metric, corrupted.reference)
                values[i, batch.indices] = metric.double().cpu()
    return values


def _head_changes(block, z, y, run_z, run_y) -> torch.Tensor:
    """Each head's write less its write in the corrupted run (`head_writes`).
    # z, run_z [B, H, N, d], y, run_y [B, N, hidden] -> [H, B, N, hidden] float32"""
    if block.attention_write_scale(y) is None:  # the write is linear in z
        attn = block.self_attn
        w_o = attn.o_proj.weight.float().view(-1, attn.n_heads, attn.head_dim)  # [hidden, H, d]
        return torch.einsum("bhnd,khd->hbnk", (z - run_z).float(), w_o)
    return edges.head_writes(block, z, y) - edges.head_writes(block, run_z, run_y)


def _circuit_forward(model, batch, corrupted, removed: torch.Tensor) -> torch.Tensor:
    """The clean prompts' forward, each input at each position reading corrupted writes along the
    `removed` edges [U, V, N] at that position ([U, V, 1]: at every position): the stream less Σ over
    its removed edges of the writer's change there (current − corrupted write), or, where fewer writers
    have a kept edge into the readers than a removed one, the stream less every earlier writer's change
    (a running sum) plus the kept ones' changes: the same sum, over fewer rows. Changes are held
    position first, so each position's sum is one matrix product of a batched one."""
    config = model.config
    b, n = batch.clean.shape
    width = b * config.hidden_size
    # [N, U, B·hidden] each writer's write less its corrupted write, filled as the forward writes (a
    # reader reads only the rows of writers before it)
    changes = torch.empty(n, removed.shape[0], width, device=removed.device)
    total = torch.zeros(n, 1, width, device=removed.device)  # [N, 1, B·hidden] Σ of the rows written
    kept = edges.edge_index(config)[2][..., None].to(removed.device) & ~removed  # like `removed`: the
    # logits at other positions than the last read the clean stream, which no metric reads
    streams: dict[int, torch.Tensor] = {}
    heads: dict[int, torch.Tensor] = {}
    attention_parts: dict[int, torch.Tensor | None] = {}

    def removed_part(count: int, columns: slice) -> torch.Tensor | None:
        """Σ over the removed edges into these readers of the writers' changes  # -> [B, r, N, hidden]"""
        cut = removed[:count, columns]  # [count, r, N or 1]
        if not cut.any():
            return None
        joined = kept[:count, columns]  # [count, r, N or 1]
        cut_rows, kept_rows = (mask.flatten(1).any(1).nonzero()[:, 0] for mask in (cut, joined))
        if len(kept_rows) < len(cut_rows):
            part = total - summed(joined, kept_rows, count)  # [N, r, B·hidden]
        else:
            part = summed(cut, cut_rows, count)
        return part.view(n, -1, b, config.hidden_size).permute(2, 1, 0, 3)

    def summed(mask: torch.Tensor, rows: torch.Tensor, count: int) -> torch.Tensor:
        """Σ over the writers `rows` of their changes where `mask` [count, r, N] holds: a gather of
        those rows where they are few, else every row's, the rest weighted 0 (no copy of the changes).
        # -> [N, r, B·hidden]"""
        if 2 * len(rows) < count:
            weights, written = mask[rows].permute(2, 1, 0).float(), changes[:, rows]
        else:
            weights, written = mask.permute(2, 1, 0).float(), changes[:, :count]
        return torch.bmm(weights.expand(n, -1, -1), written)  # weights [N or 1, r, rows]

    def add(rows: slice, change: torch.Tensor) -> None:
        """Writers' changes [rows, B, N, hidden] into `changes` and the running sum."""
        change = change.permute(2, 0, 1, 3).reshape(n, -1, width)  # [N, rows, B·hidden]
        changes[:, rows] = change
        total.add_(change.sum(1, keepdim=True))

    def block_input(layer, x):
        streams[layer] = x
        if layer == 0:
            add(slice(0, 1), (x.float() - corrupted.embedding.float())[None])

    def heads_tap(layer, z):
        heads[layer] = z

    def attention_output(layer, y):
        first = edges.written_before(config, layer)
        run_y = None if corrupted.attention_output is None else corrupted.attention_output[layer]
        change = _head_changes(model.layers[layer], heads.pop(layer), y, corrupted.z[layer], run_y)
        add(slice(first, first + config.n_heads), change)

    def mlp_output(layer, m):
        index = edges.written_before(config, layer, mlp=True)
        add(slice(index, index + 1), (m.float() - corrupted.mlp[layer].float())[None])

    def projection(kind):
        def tap(layer, value):
            if layer not in attention_parts:  # q, k and v's readers at once: one pass over the rows
                where = edges.reader_slices(config, layer)
                attention_parts[layer] = removed_part(
                    edges.written_before(config, layer), slice(where["q"].start, where["v"].stop)
                )
            part = attention_parts[layer]
            if part is None:
                return None
            where, first = (
                edges.reader_slices(config, layer)[kind],
                edges.reader_slices(config, layer)["q"].start,
            )
            part = part[:, where.start - first : where.stop - first]
            inputs = streams[layer][:, None] - part.to(value.dtype)  # [B, heads, N, hidden]
            return edges.project_heads(model.layers[layer], kind, inputs)

        return tap

    def mlp_input(layer, x):
        part = removed_part(
            edges.written_before(config, layer, mlp=True), edges.reader_slices(config, layer)["mlp"]
        )
        return None if part is None else x - part[:, 0].to(x.dtype)

    def block_output(layer, x):
        if layer != config.n_layers - 1:
            return None
        part = removed_part(changes.shape[1], slice(-1, None))
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

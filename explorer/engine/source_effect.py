"""The causal test of a score's split (`engine.qk`): remove one source's write from one side of one head's
score, the key's stream or the query's, and recompute what the head reads from it, beside what the
split predicted.

- Removed: the source's write at that position is taken out of the stream the side reads (`zero`), or
  replaced by its mean over the prompt's positions (`mean`); the q/k bias (`("bias",)`) is dropped from
  that side's projection (its mean is itself: `mean` changes nothing). Only that side of this one
  head moves: the rest of the model, and every other key or query, is as the run computed it.
- Recomputed: the input norm at the new stream, the projection, QK-norm, RoPE at the position, the
  scaled score; the softmax of the query's row with the new score (key side: that one entry; query
  side: the whole row, every key scored by the new query).
- Predicted: the split's linear reading with every norm frozen at the real stream: the score less the
  source's part of it (its column of the table on the key side; on the query side the source's query
  part against each real key), the mean's part added in `mean` mode; its weight from the same softmax.
The gap between changed and predicted is what the frozen norms (and a large removal) leave out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine import rope
from explorer.engine import rows as rows_module
from explorer.engine.lens import check_position
from explorer.engine.qk import Source, _attention_at, _check, _pass, _side, _written_by_heads, sources

SIDES = ("key", "query")
MODES = ("zero", "mean")


@dataclass(frozen=True, eq=False)
class SourceEffect:
    """One source removed from one side of one head's score (module doc)."""

    layer: int
    head: int
    query: int
    key: int
    source: Source
    side: str
    mode: str
    score: float  # the real scaled score of the query for the key
    changed_score: float  # with the source removed, every norm recomputed
    predicted_score: float  # the split's linear prediction, norms frozen
    weight: float  # the real attention weight of the query on the key
    changed_weight: float
    predicted_weight: float

    @property
    def score_change(self) -> float:
        return self.changed_score - self.score

    @property
    def predicted_change(self) -> float:
        return self.predicted_score - self.score


def parse_source(config, layer: int, source) -> Source:
    """A source as `sources` names it, from ("head", l, h), ("mlp", l), ("o_bias", l), ("embedding",) or
    ("bias",); one that did not write the stream entering `layer` is refused, naming what did."""
    if not isinstance(source, tuple | list) or not source:
        raise ValueError(
            f"a source is a tuple such as ('head', 3, 1), ('mlp', 2) or ('embedding',), got {source!r}"
        )
    named = (*source, None, None)[:3]
    if named not in sources(config, layer):
        raise ValueError(
            f"{tuple(source)!r} did not write the stream layer {layer} reads: its sources are the embedding, "
            f"the heads, o_proj biases and MLPs of layers 0–{layer - 1}"
            + (", and the q/k bias" if config.qkv_bias else "")
            if layer
            else f"{tuple(source)!r} did not write the stream layer 0 reads: only the embedding did"
        )
    return named


def write_of(run, source: Source, positions: list[int]) -> torch.Tensor:
    """What `source` wrote into the stream at `positions` (sorted), as `engine.qk` splits it.
    # -> [P, hidden] float32"""
    kind, earlier, head = source
    inputs = run.layer_inputs
    if kind == "embedding":
        return inputs[0, positions].float()
    z, y = _attention_at(run, earlier, _pass(run, positions[-1] + 1), positions)
    written = _written_by_heads(run.explorer.model.layers[earlier], z, y)  # [H (+1), P, hidden]
    if kind == "head":
        return written[head]
    if kind == "o_bias":
        return written[-1]
    added = (inputs[earlier + 1, positions] - inputs[earlier, positions]).float()
    return added - written.sum(0)  # the MLP


@torch.inference_mode()
def source_effect(
    run, layer: int, head: int, query: int, key: int, source, side: str = "key", mode: str = "zero"
):
    """One source removed from one side of `head`'s score of `query` for `key` (module doc)."""
    _check(run, layer, head)
    query, key = check_position(run, query, "query"), check_position(run, key, "key")
    if side not in SIDES:
        raise ValueError(f"side is 'key' or 'query', got {side!r}")
    if mode not in MODES:
        raise ValueError(f"mode is 'zero' or 'mean', got {mode!r}")
    named = parse_source(run.config, layer, source)
    p, block = run.projections(layer), run.explorer.model.layers[layer]
    attn, kv = block.self_attn, int(p.kv_head[head])
    rows = run.attention_rows(layer, [query], head)
    allowed, real_row = rows.allowed[0], rows.scaled[0, 0].float()  # [N] bool, [N]
    if not allowed[key]:
        raise ValueError(f"query {query} does not see key {key} in layer {layer} (the mask): its weight is 0")
    position = key if side == "key" else query
    proj, norm, index = (attn.k_proj, attn.k_norm, kv) if side == "key" else (attn.q_proj, attn.q_norm, head)
    stream = run.layer_inputs[layer, position].float()  # [hidden]
    real = (p.k[kv, position] if side == "key" else p.q[head, position]).to(stream.device)  # [d]
    removed, added = _removal(run, named, position, mode)  # [hidden] each, or None for the bias
    changed = _vector(block, proj, norm, index, stream - removed + added, position, p.inv_freq, named, mode)
    predicted = _predicted(
        block, proj, norm, index, stream, real, position, p.inv_freq, named, mode, removed, added
    )
    changed, predicted = changed.cpu(), predicted.cpu()
    if side == "key":
        q = p.q_rot[head, query]
        new_row, linear_row = real_row.clone(), real_row.clone()
        new_row[key] = float(q @ changed) * p.scale
        linear_row[key] = real_row[key] + float(q @ predicted) * p.scale
    else:
        keys = p.k_rot[kv]  # [N, d]
        new_row = keys @ changed * p.scale
        linear_row = real_row + keys @ predicted * p.scale
    # each row's softmax, the scores already scaled: the mask and softmax of every reading (`engine.rows`)
    weights = [
        rows_module.softmax_(rows_module.mask_(row.clone(), 1.0, allowed))[key]
        for row in (real_row, new_row, linear_row)
    ]
    return SourceEffect(
        layer=layer,
        head=head,
        query=query,
        key=key,
        source=named,
        side=side,
        mode=mode,
        score=float(real_row[key]),
        changed_score=float(new_row[key]),
        predicted_score=float(linear_row[key]),
        weight=float(weights[0]),
        changed_weight=float(weights[1]),
        predicted_weight=float(weights[2]),
    )


def _removal(run, source: Source, position: int, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """What the side's stream loses and gains: the source's write at `position`, and in `mean` mode its
    mean over the prompt's positions (the bias: nothing; it leaves the projection instead).
    # -> [hidden], [hidden] float32"""
    zero = torch.zeros(run.config.hidden_size, device=run.layer_inputs.device)
    if source[0] == "bias":
        return zero, zero
    removed = write_of(run, source, [position])[0]
    added = write_of(run, source, list(range(run.n_tokens))).mean(0) if mode == "mean" else zero
    return removed, added


def _vector(block, proj, norm, index: int, stream, position: int, inv_freq, source: Source, mode: str):
    """The side's rotated query or key of head `index` from `stream`, every norm recomputed; without
    the projection's bias where the bias is the source removed (`zero`).  # [hidden] -> [d] float32"""
    d = block.self_attn.head_dim
    weight = proj.weight.float().view(-1, d, proj.weight.shape[-1])[index]  # [d, hidden]
    normed = block.attention_input(stream.to(proj.weight.dtype)).float()  # [hidden]
    vector = weight @ normed  # [d]
    if proj.bias is not None and not (source[0] == "bias" and mode == "zero"):
        vector = vector + proj.bias.float().view(-1, d)[index]
    if norm is not None:
        vector = norm(vector.to(proj.weight.dtype)).float()
    return _rotated(vector, position, inv_freq)


def _predicted(
    block, proj, norm, index, stream, real, position, inv_freq, source: Source, mode, removed, added
):
    """The change of the side's rotated vector the split predicts, norms frozen at the real stream and
    projection: the mean's part less the source's.  # -> [d] float32"""
    if source[0] == "bias":
        if proj.bias is None or mode == "mean":
            return torch.zeros_like(real)
        parts = _side(
            block,
            proj,
            norm,
            index,
            torch.zeros(1, stream.shape[0], device=stream.device),
            stream,
            real,
            position,
            inv_freq,
        )
        return -parts[-1]  # the bias's own part, dropped
    parts = torch.stack([added - removed])  # [1, hidden]
    return _side(block, proj, norm, index, parts, stream, real, position, inv_freq)[0]


def _rotated(vector: torch.Tensor, position: int, inv_freq: torch.Tensor) -> torch.Tensor:
    where = torch.tensor([position], device=vector.device)
    cos, sin = rope.cos_sin(rope.angles(where, inv_freq.to(vector.device)))  # [1, d] ×2
    return rope.apply_rope(vector[None], cos, sin)[0]

"""What the model is about to say at every layer, and who writes it: the logit lens, direct logit
attribution, and every head's attention to one token. All read a Run's cached layer inputs; none runs
the model again over every position.

- The logit lens (nostalgebraist 2020) reads the residual stream after `l` blocks through the final norm
  and the LM head: `lm_head(norm(h_l))`, each position with its own RMS. Layer 0 is the embeddings; at
  layer L it is the model's own logits, read from the normed final stream the forward kept (the norm is
  applied once there, never twice: the pitfall behind TransformerLens #523). Logits are computed a
  tile of (layer, position) rows × vocabulary columns at a time within `LENS_TILE_BYTES`, keeping only
  the top-k, logsumexp and KL: [L+1, N, vocab] is never held (1.6 GB for SmolLM2 at 256 tokens).
- Direct logit attribution (TransformerLens `logit_attrs`) splits the logit of one token (or the
  difference of two) at one position into what each head, each MLP, each o_proj bias and the embedding
  wrote into the stream, each read through the final norm with its scale frozen at the real stream's
  RMS there. The parts then sum to the logit exactly, up to float error. Each block is entered from its
  cached input with the position alone as its query (`Transformer.hidden_states(last_only=True)`), its
  heads' outputs and MLP output read by taps: the direct effect, where patching measures the total.
- `attention_to`: every head's weight from one query to one key, from each layer's projections.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from explorer.engine import deadline
from explorer.engine.interventions import single_token
from explorer.engine.taps import Taps

LENS_SLAB = 2048  # vocabulary columns a lens tile takes at once
LENS_TILE_BYTES = 8 * 2**20  # one lens tile, [(L+1)·positions, slab] float32: held in cache
TOP_RUN = 64  # a tile's columns searched for its top-k in runs of this many


def check_position(run, position: int, name: str = "position") -> int:
    n = run.n_tokens
    if isinstance(position, bool) or not isinstance(position, int) or not -n <= position < n:
        raise ValueError(f"{name} must be a whole number in [{-n}, {n - 1}], got {position!r}")
    return position % n


@dataclass(frozen=True, eq=False)
class LogitLens:
    """The lens at `positions`, every layer: layer 0 the embeddings, layer L the model's output."""

    positions: list[int]  # [P] the positions computed
    top_ids: torch.Tensor  # [L+1, P, k] int64
    top_probs: torch.Tensor  # [L+1, P, k] float32
    kl_to_final: torch.Tensor  # [L+1, P] KL(p_final ‖ p_layer) in nats, float32
    run: object = field(repr=False)

    def logits(self, layer: int) -> torch.Tensor:
        """The lens' logits at `layer` for the positions computed.  # [P, vocab] float32 CPU"""
        n_layers = self.run.config.n_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= n_layers:
            raise ValueError(f"layer must be a whole number in [0, {n_layers}], got {layer!r}")
        with torch.inference_mode():
            return _lens_logits(self.run, layer, self.positions).cpu()


def _lens_logits(run, layer: int, positions: list[int]) -> torch.Tensor:
    """lm_head(norm(h_layer)) at `positions`; at the last layer the model's own logits.  # [P, vocab]"""
    model = run.explorer.model
    if layer == run.config.n_layers:
        normed = run.final_hidden[positions]  # the forward's own final norm, applied once
    else:
        normed = model.final_norm(run.layer_inputs[layer, positions])
    return model.logits(normed).float()


def _every_layers_logits(run, positions: list[int]) -> torch.Tensor:
    """The lens' logits of every layer at `positions`, in one product with the LM head (which reads its
    weights once, where a product a layer would read them L+1 times).  # -> [L+1, P, vocab] float32"""
    model = run.explorer.model
    streams = run.layer_inputs[:, positions]  # [L, P, hidden]
    normed = torch.cat([model.final_norm(streams), run.final_hidden[None, positions]])  # [L+1, P, hidden]
    return model.logits(normed).float()


@torch.inference_mode()
def token_across_layers(run, token: str | int, position: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """A token's rank (1: the lens' top token) and probability after every layer at `position`, the
    token given as its text (one token of the vocabulary) or its id.  # -> [L+1] int64, [L+1] float32"""
    position = check_position(run, position)
    token_id = resolve_token(run, token, "token")
    logits = _every_layers_logits(run, [position])[:, 0]  # [L+1, V]
    ranks = (logits > logits[:, token_id, None]).sum(-1) + 1
    return ranks.cpu(), logits.softmax(-1)[:, token_id].cpu()


@torch.inference_mode()
def logit_lens(run, positions: list[int] | None = None, top_k: int = 5) -> LogitLens:
    """The top-k tokens, their probabilities and the KL to the output at every layer and position."""
    config, n = run.config, run.n_tokens
    wanted = list(range(n)) if positions is None else [check_position(run, p) for p in positions]
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= config.vocab_size:
        raise ValueError(f"top_k must be a whole number in [1, {config.vocab_size}], got {top_k!r}")
    layers = config.n_layers + 1
    top_ids = torch.empty(layers, len(wanted), top_k, dtype=torch.long)
    top_probs = torch.empty(layers, len(wanted), top_k)
    kl = torch.empty(layers, len(wanted))
    # Every layer's rows of a block of positions go through the LM head together, a slab of the
    # vocabulary at a time, so each [rows, slab] tile is reduced to its top-k and logsumexp while it
    # is still in cache (one [rows, vocab] product, then passes over it, went to memory three times).
    slab = max(LENS_SLAB, top_k)
    block = max(1, LENS_TILE_BYTES // (4 * slab * layers))  # positions a block
    # One tile's buffers for every block: a fresh [rows, slab] tile a slab, freed among the small
    # results kept, fragments the C heap until the process holds many tiles' worth of memory.
    weight = run.explorer.model.lm_head.weight
    tiles = LensTiles(
        raw=weight.new_empty(layers * block * slab),
        product=torch.empty(layers * block * slab, device=weight.device),
    )
    for first in deadline.steps(range(0, len(wanted), block)):
        chunk = wanted[first : first + block]
        ids, values, lse, kl_rows = _lens_block(run, chunk, top_k, slab, tiles)
        top_probs[:, first : first + len(chunk)] = (values - lse[..., None]).exp().cpu()
        top_ids[:, first : first + len(chunk)] = ids.cpu()
        kl[:, first : first + len(chunk)] = kl_rows.cpu()
    return LogitLens(positions=wanted, top_ids=top_ids, top_probs=top_probs, kl_to_final=kl, run=run)


def _top(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`logits.topk(k)` of a tile, found among the k runs of `TOP_RUN` columns with the largest maxima
    (a top-k value's run has a maximum at least that value, and at most k − 1 runs can beat it): a
    vectorised max over the tile and a top-k over k runs, where a top-k over the whole tile is 4× slower.
    # [R, S] -> [R, k] values, [R, k] int64 columns"""
    rows, width = logits.shape
    if width % TOP_RUN or k * TOP_RUN >= width:
        return logits.topk(min(k, width), dim=-1)
    runs = logits.view(rows, width // TOP_RUN, TOP_RUN)
    best_runs = runs.amax(-1).topk(k, dim=-1).indices  # [R, k]
    columns = (best_runs[..., None] * TOP_RUN + torch.arange(TOP_RUN)).view(rows, -1)  # [R, k·run]
    values, picked = logits.gather(-1, columns).topk(k, dim=-1)
    return values, columns.gather(-1, picked)


@dataclass(frozen=True)
class LensTiles:
    """Flat scratch for a lens tile, viewed to each block's shape: the LM head's product in the
    weights' dtype, and a float32 tile the size of the logits."""

    raw: torch.Tensor  # [(L+1)·block·slab] the model's dtype
    product: torch.Tensor  # [(L+1)·block·slab] float32

    def view(self, buffer: torch.Tensor, *shape: int) -> torch.Tensor:
        return buffer[: math.prod(shape)].view(*shape)


def _lens_block(run, positions: list[int], top_k: int, slab: int, tiles: LensTiles):
    """The lens at a block of positions, every layer: top-k ids and logits, logsumexp and KL.
    # -> [L+1, B, k] int64, [L+1, B, k], [L+1, B], [L+1, B] float32"""
    deadline.check()
    model = run.explorer.model
    streams = run.layer_inputs[:, positions]  # [L, B, hidden]
    normed = torch.cat([model.final_norm(streams), run.final_hidden[None, positions]])  # [L+1, B, hidden]
    layers, b = normed.shape[:2]
    rows = normed.reshape(layers * b, -1)  # [R, hidden], R = (L+1)·B
    weight, cap = model.lm_head.weight, run.config.final_logit_softcapping  # [V, hidden]
    starts = range(0, weight.shape[0], slab)
    # Σ_v p_final·logit_layer for the KL, summed from each [rows, slab] tile while it is in cache, so
    # the LM head's weights are read once (a product with them for each term would read them again:
    # with a large vocabulary, most of the last position's cost). p_final = exp(final − lse_final) is
    # known only after the last tile: the sums are kept against the running maximum `logits_peak` of
    # the final logits, rescaled when it grows (as an online softmax): mass = Σ exp(final − logits_peak),
    # cross = Σ exp(final − logits_peak)·logit_layer.
    logits_peak = torch.full((b,), -torch.inf, device=rows.device)  # [B]
    mass, cross = torch.zeros(b, device=rows.device), torch.zeros(layers, b, device=rows.device)
    slab_values = torch.empty(len(starts), layers * b, top_k, device=rows.device)  # [T, R, k]
    slab_ids = torch.empty(len(starts), layers * b, top_k, dtype=torch.long, device=rows.device)
    slab_lse = torch.empty(len(starts), layers * b, device=rows.device)  # [T, R]
    for t, start in enumerate(starts):
        part = weight[start : start + slab]  # [S, hidden]
        raw = torch.mm(rows, part.t(), out=tiles.view(tiles.raw, layers * b, len(part)))  # [R, S]
        logits = raw if raw.dtype == torch.float32 else raw.float()
        if cap:
            logits.div_(cap).tanh_().mul_(cap)
        tile = logits.view(layers, b, -1)  # [L+1, B, S]: its last layer is the model's own logits
        grown = torch.maximum(logits_peak, tile[-1].amax(-1))
        rescale = (logits_peak - grown).exp()  # 0 at the first tile
        weights = (tile[-1] - grown[:, None]).exp()  # [B, S]
        mass = mass * rescale + weights.sum(-1)
        weighted = torch.mul(tile, weights, out=tiles.view(tiles.product, *tile.shape))
        cross = cross * rescale + weighted.sum(-1)
        logits_peak = grown
        values, ids = _top(logits, top_k)  # [R, k]
        # lse = max + log Σ exp(logit − max), the tile overwritten in place
        top = values[:, :1]
        slab_lse[t] = top[:, 0] + logits.sub_(top).exp_().sum(-1).log_()
        slab_values[t] = values
        slab_ids[t] = ids + start
    values, best = slab_values.permute(1, 0, 2).flatten(1).topk(top_k, dim=-1)  # [R, k]
    ids = slab_ids.permute(1, 0, 2).flatten(1).gather(-1, best)
    lse = slab_lse.logsumexp(0).view(layers, b)
    # KL(p_final ‖ p_layer) = Σ p_final·(logit_final − logit_layer) − lse_final + lse_layer
    kl = ((cross[-1] - cross) / mass - lse[-1] + lse).clamp_min(0)
    return ids.view(layers, b, top_k), values.view(layers, b, top_k), lse, kl


@dataclass(frozen=True, eq=False)
class Attribution:
    """The direct effect of every part of the model on one logit (or logit difference) at one position:
    `embedding + heads.sum() + mlps.sum() + biases.sum() + stream_edits.sum() == total` up to float error."""

    heads: torch.Tensor  # [L, H] head h's output z_h · W_O[h] at the position, read as a logit
    mlps: torch.Tensor  # [L]
    biases: torch.Tensor  # [L] o_proj's bias (zeros where the model has none)
    embedding: float
    total: float  # the model's logit (or logit difference) there
    position: int
    answer: str | int
    answer_id: int
    distractor: str | int | None = None
    distractor_id: int | None = None
    # [L+1] what an edited run's edits of the stream entering block l added (L: the final norm's
    # input), read as a logit; zeros where nothing edits the stream
    stream_edits: torch.Tensor | None = None


@torch.inference_mode()
def logit_attribution(
    run, answer: str | int, distractor: str | int | None = None, position: int = -1
) -> Attribution:
    """Split logit(answer) (minus logit(distractor), if given) at `position` into its direct parts. A
    token is its text (one token of the vocabulary) or its id."""
    model, config = run.explorer.model, run.config
    if config.final_logit_softcapping:
        raise ValueError("This model soft-caps its logits (tanh), so a logit is not a sum of direct parts.")
    position = check_position(run, position)
    answer_id = resolve_token(run, answer, "answer")
    distractor_id = None if distractor is None else resolve_token(run, distractor, "distractor")
    head_outputs = torch.empty(config.n_layers, config.n_heads, config.head_dim, dtype=run.layer_inputs.dtype)
    mlps = torch.empty(config.n_layers, config.hidden_size, dtype=run.layer_inputs.dtype)
    head_outputs, mlps = head_outputs.to(run.layer_inputs.device), mlps.to(run.layer_inputs.device)

    def record_heads(layer: int, y: torch.Tensor) -> None:  # y [1, H, 1, d] as the run's taps left it
        head_outputs[layer] = y[0, :, -1]

    def record_mlp(layer: int, y: torch.Tensor) -> None:  # y [1, 1, hidden]
        mlps[layer] = y[0, -1]

    def record_attention(layer: int, y: torch.Tensor) -> None:  # y [1, 1, hidden] o_proj's output
        scale = model.layers[layer].attention_write_scale(y[0, -1])
        if scale is not None:
            write_scales[layer] = scale

    write_scales = torch.ones(config.n_layers, config.hidden_size, device=run.layer_inputs.device)
    taps = run.taps.then(  # its edits and ablation, as its forward applied them; then the readers
        Taps(heads=record_heads, attention_output=record_attention, mlp_output=record_mlp)
    )
    for layer in range(config.n_layers):
        stream = run.layer_inputs[layer, None, : position + 1]  # [1, position + 1, hidden]
        model.hidden_states(stream=stream, layers=range(layer, layer + 1), taps=taps, last_only=True)

    unembed = model.lm_head.weight[answer_id].float()
    if distractor_id is not None:
        unembed = unembed - model.lm_head.weight[distractor_id].float()
    added = _stream_edits(run, position, head_outputs, mlps)  # [L+1, hidden]
    h_last = _pre_norm(run, position, head_outputs, mlps) + added[-1]  # [hidden] before the final norm
    direction = model.norm.scale(h_last) * unembed  # [hidden]: a part's dot with it is its logit
    per_head, biases = [], []
    for layer, block in enumerate(model.layers):
        # what the heads write, read through the norm after attention where the model has one (frozen)
        through = direction * write_scales[layer]  # [hidden]
        w_o = block.self_attn.o_proj.weight.float()  # [hidden, H·d]
        read = (through @ w_o).view(config.n_heads, config.head_dim)  # [H, d]
        per_head.append((head_outputs[layer].float() * read).sum(-1))
        bias = block.self_attn.o_proj.bias
        biases.append(torch.zeros((), device=direction.device) if bias is None else bias.float() @ through)
    biases = torch.stack(biases)
    return Attribution(
        heads=torch.stack(per_head).cpu(),
        mlps=(mlps.float() @ direction).cpu(),
        biases=biases.cpu(),
        embedding=float((run.layer_inputs[0, position].float() - added[0]) @ direction),
        total=float(run.final_hidden[position].float() @ unembed),
        position=position,
        answer=answer,
        answer_id=answer_id,
        distractor=distractor,
        distractor_id=distractor_id,
        stream_edits=(added @ direction).cpu(),
    )


def _stream_edits(run, position: int, head_outputs: torch.Tensor, mlps: torch.Tensor) -> torch.Tensor:
    """What the run's edits of the stream added at `position` where each block is entered (L: the final
    norm's input): the stream entered less the one the block before left (the first: less the
    embedding); zeros at the layers no edit writes.  # -> [L+1, hidden] float32"""
    model, config = run.explorer.model, run.config
    added = torch.zeros(config.n_layers + 1, config.hidden_size, device=run.layer_inputs.device)
    edited = {e.layer for e in (run.edits.edits if run.edits else []) if e.tap == "resid"}
    for layer in sorted(edited):
        if layer == 0:
            left = model.embed(torch.tensor([[run.ids[position]]], device=added.device))[0, 0]
        else:
            left = _block_output(run, layer - 1, position, head_outputs, mlps)
        if layer < config.n_layers:
            entered = run.layer_inputs[layer, position]
        else:  # the final norm's input, edited as the forward edited it
            entered = run.edits.taps(range(position, position + 1)).block_output(layer - 1, left[None, None])
            entered = entered[0, 0]
        added[layer] = entered.float() - left.float()
    return added


def _block_output(run, layer: int, position: int, head_outputs: torch.Tensor, mlps: torch.Tensor):
    """The stream leaving block `layer` at `position`: its input plus what its attention and MLP wrote.
    # -> [hidden] (model dtype)"""
    block = run.explorer.model.layers[layer]
    written = block.attention_written(block.self_attn.merge_heads(head_outputs[layer][None, :, None])[0, 0])
    return run.layer_inputs[layer, position] + written + mlps[layer]


def resolve_token(run, token: str | int, role: str) -> int:
    """The id of a token given as its id, or as its text (a single token: `single_token`)."""
    vocab_size = run.config.vocab_size
    if isinstance(token, int) and not isinstance(token, bool):
        if not 0 <= token < vocab_size:
            raise ValueError(f"the {role} id must be in [0, {vocab_size - 1}], got {token}")
        return token
    return single_token(run.explorer.tokenizer, token, role)


def _pre_norm(run, position: int, head_outputs: torch.Tensor, mlps: torch.Tensor) -> torch.Tensor:
    """The stream leaving the last block at `position`, before the final norm (and its edits).
    # -> [hidden] float32"""
    return _block_output(run, run.config.n_layers - 1, position, head_outputs, mlps).float()


@torch.inference_mode()
def attention_to(run, key: int, query: int = -1) -> torch.Tensor:
    """Every head's attention weight from `query` to `key` (0 where the key is after the query).
    # -> [L, H] float32 CPU"""
    query, key = check_position(run, query, "query"), check_position(run, key, "key")
    config = run.config
    weights = torch.zeros(config.n_layers, config.n_heads)
    if key > query:
        return weights
    for layer in range(config.n_layers):
        rows = run.projections(layer, remember=False).rows([query], n_keys=query + 1)
        weights[layer] = rows.probs[:, 0, key]  # [H]
    return weights

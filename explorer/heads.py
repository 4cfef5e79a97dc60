"""What each head does, as numbers: reductions of one layer's softmax maps to one score per head.

All reductions take `probs` [H, N, N] (rows sum to 1, causal) and return [H]. `prompt_profile` sweeps
every layer of a run one at a time and keeps only the [L, H] reductions, never every layer's maps.
`head_type_scores` measures what kind each head is, on held-out text and on a repeated random sequence.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from explorer.attention import eager_attention

PROFILE_SCORES = ("previous_token", "sink", "induction", "entropy", "distance")


def previous_token_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention from position i to i−1, over i ≥ 1.  # [H, N, N] -> [H]"""
    return probs.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def sink_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention to position 0, over queries i ≥ 1 (position 0 can only attend to itself)."""
    return probs[:, 1:, 0].mean(-1)


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Mean row entropy in nats (0: one key takes everything; log(i+1): uniform over the past)."""
    return -(probs * probs.clamp_min(1e-30).log()).sum(-1).mean(-1)


def mean_distance(probs: torch.Tensor) -> torch.Tensor:
    """Mean over queries of the expected distance i − j to the attended key, in tokens."""
    n = probs.shape[-1]
    positions = torch.arange(n, dtype=probs.dtype, device=probs.device)
    distance = (positions[:, None] - positions[None, :]).clamp_min(0)  # [N, N]
    return (probs * distance).sum(-1).mean(-1)


def induction_score(probs: torch.Tensor, period: int) -> torch.Tensor:
    """For a sequence whose tokens repeat with `period` (a random block written twice, possibly after
    a prefix that ends `period` tokens before the second copy starts), the mean attention from each
    token of the second copy to the token right after its earlier occurrence: i -> i − period + 1.
    # [H, N, N] -> [H]"""
    n = probs.shape[-1]
    if not 1 <= period < n:
        raise ValueError(f"period must be in [1, {n - 1}], got {period}")
    return probs.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[:, period:].mean(-1)


def induction_targets(ids: torch.Tensor) -> torch.Tensor:
    """Where an induction head looks on a prompt: from query i, the key right after each earlier
    occurrence of token i (j + 1 for every j < i with ids[j] == ids[i]).  # [N] -> [N, N] bool"""
    earlier = (ids[:, None] == ids[None, :]).tril(-1)  # [N, N] j < i, same token
    targets = torch.zeros_like(earlier)
    targets[:, 1:] = earlier[:, :-1]
    return targets


def prompt_induction_score(probs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Induction measured on the prompt itself: for each token seen before, the attention it pays to
    the tokens after its earlier occurrences, averaged over those tokens (NaN for every head if no
    token repeats).  # [H, N, N], [N] -> [H]"""
    targets = induction_targets(ids.to(probs.device))
    repeated = targets.any(-1)  # [N] queries whose token occurred before
    if not repeated.any():
        return torch.full(probs.shape[:1], float("nan"), dtype=probs.dtype, device=probs.device)
    mass = torch.einsum("hqk,qk->hq", probs, targets.to(probs.dtype))  # [H, N]
    return mass[:, repeated].mean(-1)


def layer_profile(probs: torch.Tensor, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every profile score of one layer.  # [H, N, N], [N] -> {name: [H]}"""
    return {
        "previous_token": previous_token_score(probs),
        "sink": sink_score(probs),
        "induction": prompt_induction_score(probs, ids),
        "entropy": entropy(probs),
        "distance": mean_distance(probs),
    }


def prompt_profile(run) -> dict[str, torch.Tensor]:
    """Every profile score for every layer and head of a run, one layer in memory at a time.
    # -> {name: [L, H]}"""
    ids = torch.tensor(run.ids)
    layers = range(run.config.n_layers)
    rows = [layer_profile(run.attention(layer, remember=False).probs, ids) for layer in layers]
    return {name: torch.stack([row[name] for row in rows]) for name in PROFILE_SCORES}


HEAD_TYPES = ("previous_token", "induction", "sink")


@torch.inference_mode()
def layer_maps(model, ids: torch.Tensor) -> Iterator[torch.Tensor]:
    """Each layer's softmax maps for one sequence, one layer at a time.  # [N] -> [H, N, N] per layer"""
    config, embed = model.config, model.embed_tokens.weight
    layer_inputs = torch.empty(
        config.n_layers, 1, len(ids), config.hidden_size, dtype=embed.dtype, device=embed.device
    )
    model.hidden_states(ids[None].to(embed.device), layer_inputs)
    for layer, block in enumerate(model.layers):
        normed = block.input_layernorm(layer_inputs[layer, 0])  # [N, hidden]
        yield eager_attention(block.self_attn, normed, model.inv_freq, layer).probs


def token_windows(ids: torch.Tensor, length: int, count: int | None = None) -> torch.Tensor:
    """Non-overlapping windows of `length` tokens; at most `count`, spread evenly.  # [T] -> [W, length]"""
    n_windows = len(ids) // length
    if n_windows == 0:
        raise ValueError(f"{len(ids)} tokens are too few for one window of {length}")
    picked = torch.linspace(0, n_windows - 1, min(count or n_windows, n_windows)).round().long()
    return ids[: n_windows * length].view(n_windows, length)[picked]


def repeated_random_tokens(tokenizer, period: int, count: int, seed: int = 0) -> torch.Tensor:
    """`count` sequences of `period` uniformly random ordinary tokens, each written twice.  # [S, 2·period]"""
    special = set(tokenizer.get_added_tokens_decoder())
    ordinary = torch.tensor([i for i in range(tokenizer.get_vocab_size()) if i not in special])
    generator = torch.Generator().manual_seed(seed)
    first_copy = ordinary[torch.randint(len(ordinary), (count, period), generator=generator)]
    return torch.cat([first_copy, first_copy], dim=1)


def mean_layer_scores(model, sequences: torch.Tensor, reductions: dict) -> dict[str, torch.Tensor]:
    """Each reduction of every layer's maps, averaged over the sequences.  # [S, N] -> {name: [L, H]}"""
    shape = (model.config.n_layers, model.config.n_heads)
    sums = {name: torch.zeros(shape) for name in reductions}
    for ids in sequences:
        for layer, probs in enumerate(layer_maps(model, ids)):
            for name, reduce in reductions.items():
                sums[name][layer] += reduce(probs).float().cpu()
    return {name: total / len(sequences) for name, total in sums.items()}


def head_type_scores(
    explorer, heldout_text: str, length: int = 256, count: int = 8, seed: int = 0
) -> dict[str, torch.Tensor]:
    """What kind each head is, averaged over `count` sequences of `length` tokens (capped at the context):
    previous-token and sink scores on windows of held-out text; the induction score on random tokens
    written twice (period length // 2), which no corpus can have taught by heart.  # -> {name: [L, H]}"""
    length = min(length, explorer.config.context_length)
    period = length // 2
    windows = token_windows(torch.tensor(explorer.tokenizer.encode(heldout_text).ids), length, count)
    repeated = repeated_random_tokens(explorer.tokenizer, period, count, seed)
    scores = mean_layer_scores(
        explorer.model, windows, {"previous_token": previous_token_score, "sink": sink_score}
    )
    scores |= mean_layer_scores(
        explorer.model, repeated, {"induction": lambda probs: induction_score(probs, period)}
    )
    return {name: scores[name] for name in HEAD_TYPES}

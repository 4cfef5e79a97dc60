"""What each head does, as numbers: one layer's softmax maps reduced to one score per head.

Every score is a mean over queries of a per-query value (`query_scores`), so a layer is scored a block of
queries at a time (`ScoreSums`) with the same code whether its maps are held whole or not: a whole map
is one block (`layer_profile`); a run's layers are scored from their projections, block by block within
a byte budget, without ever holding a layer's maps past it (`prompt_profile`).

`head_type_scores` measures what kind each head is, on held-out text and on a repeated random sequence.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from explorer.engine import deadline
from explorer.engine.attention import eager_attention
from explorer.engine.blockwise import query_blocks
from explorer.engine.taps import Taps, recorder

PROFILE_SCORES = ("previous_token", "sink", "induction", "entropy", "distance")
PROFILE_BLOCK_BYTES = 16 << 20  # a block of softmax rows a profile holds at once


def induction_targets(ids: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
    """Where an induction head looks on a prompt: from query i, the key right after each earlier
    occurrence of token i (j + 1 for every j < i with ids[j] == ids[i]); rows start..stop−1.
    # [N] -> [stop − start, N] bool"""
    stop = len(ids) if stop is None else stop
    queries, keys = torch.arange(start, stop), torch.arange(len(ids))
    earlier = (ids[start:stop, None] == ids[None, :]) & (
        keys[None, :] < queries[:, None]
    )  # j < i, same token
    targets = torch.zeros_like(earlier)
    targets[:, 1:] = earlier[:, :-1]
    return targets


def query_scores(
    probs: torch.Tensor, start: int, ids: torch.Tensor | None = None, names=PROFILE_SCORES
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each score named (induction only given the prompt's ids) at each of queries start.. of softmax rows
    over keys 0.. (every key the queries may see among them: later ones have p = 0), and the queries it
    is averaged over:
    - previous-token p(i → i−1) and sink p(i → 0), over queries i ≥ 1;
    - entropy −Σ p log p (0 log 0 = 0) and the expected distance i − j, over every query;
    - induction: the attention paid to the tokens after the earlier occurrences of the query's token,
      over the queries whose token occurred before.
    # probs [H, R, K] -> {name: ([H, R] values, [R] bool)}"""
    n_rows, n_keys = probs.shape[-2:]
    queries, rows = torch.arange(start, start + n_rows), torch.arange(n_rows)
    every, after_first = torch.ones(n_rows, dtype=torch.bool), queries >= 1

    def induction():
        targets = induction_targets(ids, start, start + n_rows)[:, :n_keys]  # [R, K]
        return torch.einsum("hqk,qk->hq", probs, targets.to(probs.dtype)), targets.any(-1)

    score = {
        "previous_token": lambda: (probs[:, rows, (queries - 1).clamp_min(0)], after_first),
        "sink": lambda: (probs[:, :, 0], after_first),
        "induction": induction,
        "entropy": lambda: (torch.special.entr(probs).sum(-1), every),
        # Σ_j p_ij (i − j) = i − Σ_j p_ij j: rows sum to 1 and keys after i have p = 0.
        "distance": lambda: (queries - probs @ torch.arange(n_keys, dtype=probs.dtype), every),
    }
    return {name: score[name]() for name in names if name != "induction" or ids is not None}


class ScoreSums:
    """Scores summed over blocks of queries (in float64), then averaged: NaN where no query counted."""

    def __init__(self, n_heads: int, names=PROFILE_SCORES):
        self.names = names
        self.sums = {name: torch.zeros(n_heads, dtype=torch.float64) for name in names}
        self.counts = dict.fromkeys(names, 0)

    def add(self, probs: torch.Tensor, start: int, ids: torch.Tensor | None = None) -> None:
        """A block of rows (see `query_scores`).  # [H, R, K]"""
        for name, (values, counted) in query_scores(probs, start, ids, self.names).items():
            self.sums[name] += values[:, counted].double().sum(-1)
            self.counts[name] += int(counted.sum())

    def means(self) -> dict[str, torch.Tensor]:
        """{name: [H] float32}"""
        return {name: (self.sums[name] / self.counts[name]).float() for name in self.names}


def _score(probs: torch.Tensor, name: str) -> torch.Tensor:
    sums = ScoreSums(probs.shape[0], (name,))
    sums.add(probs, 0)
    return sums.means()[name]


def previous_token_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention from position i to i−1, over i ≥ 1.  # [H, N, N] -> [H]"""
    return _score(probs, "previous_token")


def sink_score(probs: torch.Tensor) -> torch.Tensor:
    """Mean attention to position 0, over queries i ≥ 1 (position 0 can only attend to itself)."""
    return _score(probs, "sink")


def layer_profile(probs: torch.Tensor, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every profile score of one layer's whole maps.  # [H, N, N], [N] -> {name: [H]}"""
    sums = ScoreSums(probs.shape[0])
    sums.add(probs, 0, ids)
    return sums.means()


def prompt_profile(run, block_bytes: int = PROFILE_BLOCK_BYTES) -> dict[str, torch.Tensor]:
    """Every profile score for every layer and head of a run, from each layer's projections a block of
    queries at a time (rows up to the block's last key: the later ones are 0), none of them kept
    in the run's cache.  # -> {name: [L, H]}"""
    ids = torch.tensor(run.ids)
    rows = []
    for layer in deadline.steps(range(run.config.n_layers)):
        p = run.projections(layer, remember=False)
        sums = ScoreSums(p.n_heads)
        for start, stop in query_blocks(p.n_tokens, p.n_heads, block_bytes):
            sums.add(p.rows(range(start, stop), n_keys=stop).probs, start, ids)
        rows.append(sums.means())
    return {name: torch.stack([row[name] for row in rows]) for name in PROFILE_SCORES}


def induction_score(probs: torch.Tensor, period: int) -> torch.Tensor:
    """For a sequence whose tokens repeat with `period` (a random block written twice, possibly after
    a prefix that ends `period` tokens before the second copy starts), the mean attention from each
    token of the second copy to the token right after its earlier occurrence: i -> i − period + 1.
    # [H, N, N] -> [H]"""
    n = probs.shape[-1]
    if not 1 <= period < n:
        raise ValueError(f"period must be in [1, {n - 1}], got {period}")
    return probs.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[:, period:].mean(-1)


HEAD_TYPES = ("previous_token", "induction", "sink")


@torch.inference_mode()
def layer_maps(model, ids: torch.Tensor) -> Iterator[torch.Tensor]:
    """Each layer's softmax maps for one sequence, one layer at a time.  # [N] -> [H, N, N] per layer"""
    config, embed = model.config, model.embed_tokens.weight
    layer_inputs = torch.empty(
        config.n_layers, 1, len(ids), config.hidden_size, dtype=embed.dtype, device=embed.device
    )
    model.hidden_states(ids[None].to(embed.device), taps=Taps(block_input=recorder(layer_inputs)))
    for layer, block in enumerate(model.layers):
        yield eager_attention(block, layer_inputs[layer, 0], model.layer_inv_freq(layer), layer).probs


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
